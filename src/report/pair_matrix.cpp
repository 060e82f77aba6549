#include "report/pair_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <utility>

#include "bench/statistics.hpp"

namespace parbench {
namespace {

bool across(const std::vector<PairParticipant>& participants, std::size_t i, std::size_t j) {
    return participants[i].host != participants[j].host;
}

std::optional<double> median_of(std::vector<double> values) {
    if (values.empty()) return std::nullopt;
    return summarize(values).median;
}

nlohmann::json matrix_json(const std::vector<std::vector<double>>& matrix) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : matrix) {
        nlohmann::json entries = nlohmann::json::array();
        for (double value : row) entries.push_back(std::isnan(value) ? nlohmann::json(nullptr) : nlohmann::json(value));
        rows.push_back(entries);
    }
    return rows;
}

nlohmann::json optional_json(const std::optional<double>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::string label(const PairParticipant& p) { return "rank " + std::to_string(p.rank) + " (" + p.host + ")"; }

}  // namespace

bool SlowLatency::asymmetric() const { return !std::isnan(reverse_us) && latency_us >= latency_flag_factor * reverse_us; }

namespace {

using Matrix = std::vector<std::vector<double>>;

// visit(i, j, crosses) for every measured off-diagonal entry, in row order.
template <typename Visit>
void each_measured(const Matrix& matrix, const std::vector<PairParticipant>& participants, Visit visit) {
    for (std::size_t i = 0; i < participants.size(); ++i)
        for (std::size_t j = 0; j < participants.size(); ++j)
            if (i != j && !std::isnan(matrix[i][j])) visit(i, j, across(participants, i, j));
}

// The medians of a matrix's entries inside a host and across hosts.
std::pair<std::optional<double>, std::optional<double>> medians_by_kind(const Matrix& matrix,
                                                                        const std::vector<PairParticipant>& participants) {
    std::vector<double> within, crossing;
    each_measured(matrix, participants,
                  [&](std::size_t i, std::size_t j, bool crosses) { (crosses ? crossing : within).push_back(matrix[i][j]); });
    return {median_of(within), median_of(crossing)};
}

}  // namespace

PairAnalysis flag_slow_pairs(const Matrix& bandwidth, const Matrix& latency,
                             const std::vector<PairParticipant>& participants, double flag_below) {
    PairAnalysis analysis;
    std::tie(analysis.median_within_host_gbps, analysis.median_across_hosts_gbps) =
        medians_by_kind(bandwidth, participants);
    each_measured(bandwidth, participants, [&](std::size_t i, std::size_t j, bool crosses) {
        const double median = crosses ? *analysis.median_across_hosts_gbps : *analysis.median_within_host_gbps;
        if (bandwidth[i][j] < flag_below * median)
            analysis.flagged.push_back({static_cast<int>(i), static_cast<int>(j), bandwidth[i][j], median, crosses});
    });
    std::tie(analysis.median_latency_within_host_us, analysis.median_latency_across_hosts_us) =
        medians_by_kind(latency, participants);
    each_measured(latency, participants, [&](std::size_t i, std::size_t j, bool crosses) {
        const double median = crosses ? *analysis.median_latency_across_hosts_us : *analysis.median_latency_within_host_us;
        if (latency[i][j] >= latency_flag_factor * median)
            analysis.slow_latency.push_back(
                {static_cast<int>(i), static_cast<int>(j), latency[i][j], latency[j][i], median, crosses});
    });
    return analysis;
}

namespace {

// The participants in at least half of the slow pairs (of bandwidth when any is, else of
// latency): where a rank of its own could explain them. Half, not all: on a busy host a pair
// or two of other ranks fall below the line too.
std::vector<int> ranks_in_most_flagged(const PairAnalysis& analysis, std::size_t participants) {
    std::vector<std::pair<int, int>> pairs;
    for (const SlowPair& pair : analysis.flagged) pairs.emplace_back(pair.from, pair.to);
    if (pairs.empty())
        for (const SlowLatency& pair : analysis.slow_latency) pairs.emplace_back(pair.from, pair.to);
    std::vector<int> most;
    for (std::size_t p = 0; p < participants && !pairs.empty(); ++p) {
        const int index = static_cast<int>(p);
        const auto count = std::count_if(pairs.begin(), pairs.end(), [index](const auto& pair) {
            return pair.first == index || pair.second == index;
        });
        if (2 * static_cast<std::size_t>(count) >= pairs.size()) most.push_back(index);
    }
    return most;
}

std::string percent(double fraction) {
    char text[16];
    std::snprintf(text, sizeof text, "%.0f%%", 100.0 * fraction);
    return text;
}

}  // namespace

std::vector<std::string> diagnose_pairs(const PairAnalysis& analysis, const std::vector<PairParticipant>& participants,
                                        const std::vector<std::vector<double>>& cpu_share) {
    std::vector<std::string> lines;
    if (analysis.flagged.empty() && analysis.slow_latency.empty()) return lines;
    // A rank held off the CPU slows every pair it is in, whatever the link, and in those very
    // exchanges it ran on a CPU far less than its partners, who poll while they wait; behind a
    // slow link both sides wait alike.
    bool cpu_bound = false;
    for (int p : ranks_in_most_flagged(analysis, participants.size())) {
        double own = 0.0, partners = 0.0;
        int exchanges = 0;
        for (std::size_t q = 0; q < participants.size(); ++q) {
            const auto at = static_cast<std::size_t>(p);
            if (q == at || cpu_share.size() <= std::max(at, q)) continue;
            if (std::isnan(cpu_share[at][q]) || std::isnan(cpu_share[q][at])) continue;
            own += cpu_share[at][q];
            partners += cpu_share[q][at];
            ++exchanges;
        }
        if (exchanges == 0 || own >= 0.6 * partners) continue;
        cpu_bound = true;
        lines.push_back(label(participants[static_cast<std::size_t>(p)]) + " is CPU-bound, not slowed by a link: in " +
                        "its exchanges its thread ran on a CPU " + percent(own / exchanges) + " of the time, its " +
                        "partners " + percent(partners / exchanges) + "; a CPU quota or limit, a shared or "
                        "oversubscribed core or another busy process holds it off: bind ranks to cores (mpirun "
                        "--bind-to core), lift the limit, or stop what shares its core");
    }
    if (cpu_bound) return lines;
    const auto suspects = hosts_common_to_flagged(analysis, participants);
    const bool all_within = std::none_of(analysis.flagged.begin(), analysis.flagged.end(),
                                         [](const SlowPair& pair) { return pair.across_hosts; }) &&
                            std::none_of(analysis.slow_latency.begin(), analysis.slow_latency.end(),
                                         [](const SlowLatency& pair) { return pair.across_hosts; });
    std::string hosts;
    for (const auto& host : suspects) hosts += (hosts.empty() ? "" : " ") + host;
    if (all_within) {
        lines.push_back("the slow pairs are all inside a host" + (hosts.empty() ? std::string() : " (" + hosts + ")") +
                        ": shared memory, no cable or NIC in the way; look at what else runs there, CPU binding "
                        "(mpirun --bind-to core) and memory placement (NUMA), or a rank's CPU limit");
    } else if (!suspects.empty()) {
        lines.push_back("every slow pair involves " + hosts +
                        ": check that host's link (cable, NIC, switch port, its tc/QoS settings)");
    }
    return lines;
}

std::vector<std::string> hosts_common_to_flagged(const PairAnalysis& analysis,
                                                 const std::vector<PairParticipant>& participants) {
    std::map<std::string, std::size_t> appearances;
    for (const SlowPair& pair : analysis.flagged) {
        const std::string& a = participants[static_cast<std::size_t>(pair.from)].host;
        const std::string& b = participants[static_cast<std::size_t>(pair.to)].host;
        ++appearances[a];
        if (b != a) ++appearances[b];
    }
    std::map<std::string, int> all_hosts;
    for (const auto& p : participants) ++all_hosts[p.host];
    // A host in every slow pair is the culprit on its own: one more host that is merely the
    // far end of half of them (as a slow host's partner in the pairs it is in) is not.
    std::vector<std::string> in_every;
    for (const auto& [host, count] : appearances)
        if (count == analysis.flagged.size()) in_every.push_back(host);
    if (!in_every.empty() && in_every.size() < all_hosts.size()) return in_every;
    std::vector<std::string> hosts;
    for (const auto& [host, count] : appearances)
        if (2 * count >= analysis.flagged.size()) hosts.push_back(host);
    const bool explains_all = std::all_of(analysis.flagged.begin(), analysis.flagged.end(), [&](const SlowPair& pair) {
        return std::any_of(hosts.begin(), hosts.end(), [&](const std::string& host) {
            return participants[static_cast<std::size_t>(pair.from)].host == host ||
                   participants[static_cast<std::size_t>(pair.to)].host == host;
        });
    });
    // Every host of a slow pair among few hosts explains nothing: only name a strict subset.
    if (!explains_all || hosts.size() >= all_hosts.size()) return {};
    return hosts;
}

nlohmann::json pairs_result_json(const std::string& by, std::uint64_t bandwidth_bytes, std::uint64_t latency_bytes,
                                 int rounds, const std::vector<PairParticipant>& participants,
                                 const std::vector<std::vector<double>>& bandwidth_gbps,
                                 const std::vector<std::vector<double>>& latency_us,
                                 const std::vector<std::vector<double>>& cpu_share, double flag_below,
                                 const PairAnalysis& analysis) {
    nlohmann::json who = nlohmann::json::array();
    for (const auto& p : participants) who.push_back({{"rank", p.rank}, {"host", p.host}});
    nlohmann::json flagged = nlohmann::json::array();
    for (const SlowPair& pair : analysis.flagged) {
        const auto& from = participants[static_cast<std::size_t>(pair.from)];
        const auto& to = participants[static_cast<std::size_t>(pair.to)];
        flagged.push_back({{"from_rank", from.rank}, {"to_rank", to.rank}, {"from_host", from.host}, {"to_host", to.host},
                           {"bandwidth_gbps", pair.bandwidth_gbps}, {"median_gbps", pair.median_gbps},
                           {"fraction_of_median", pair.bandwidth_gbps / pair.median_gbps},
                           {"kind", pair.across_hosts ? "across hosts" : "within host"}});
    }
    nlohmann::json slow_latency = nlohmann::json::array();
    for (const SlowLatency& pair : analysis.slow_latency) {
        const auto& from = participants[static_cast<std::size_t>(pair.from)];
        const auto& to = participants[static_cast<std::size_t>(pair.to)];
        slow_latency.push_back({{"from_rank", from.rank}, {"to_rank", to.rank}, {"from_host", from.host},
                                {"to_host", to.host}, {"latency_us", pair.latency_us},
                                {"reverse_us", std::isnan(pair.reverse_us) ? nlohmann::json(nullptr) : nlohmann::json(pair.reverse_us)},
                                {"median_us", pair.median_us}, {"asymmetric", pair.asymmetric()},
                                {"kind", pair.across_hosts ? "across hosts" : "within host"}});
    }
    return {{"kind", "pairs"},
            {"by", by},
            {"method", "sendrecv exchange of bytes in both directions at once; [i][j] is rank i's median time with "
                       "peer j; rounds of a round-robin tournament keep each rank in one pair at a time"},
            {"bytes", bandwidth_bytes},
            {"latency_bytes", latency_bytes},
            {"rounds", rounds},
            {"participants", who},
            {"bandwidth_gbps", matrix_json(bandwidth_gbps)},
            {"latency_us", matrix_json(latency_us)},
            {"cpu_share", matrix_json(cpu_share)},
            {"median_bandwidth_gbps",
             {{"within_host", optional_json(analysis.median_within_host_gbps)},
              {"across_hosts", optional_json(analysis.median_across_hosts_gbps)}}},
            {"flag_below", flag_below},
            {"flagged", flagged},
            {"suspect_hosts", hosts_common_to_flagged(analysis, participants)},
            {"slow_latency", slow_latency},
            {"diagnosis", diagnose_pairs(analysis, participants, cpu_share)}};
}

void print_pair_matrix(std::ostream& out, const std::string& title, const std::vector<std::vector<double>>& matrix,
                       const std::vector<PairParticipant>& participants, int precision) {
    out << "# " << title << " (row: from, column: to)\n" << std::string(22, ' ');
    for (const auto& p : participants) {
        char cell[16];
        std::snprintf(cell, sizeof cell, "%9d", p.rank);
        out << cell;
    }
    out << '\n';
    for (std::size_t i = 0; i < matrix.size(); ++i) {
        char head[64];
        std::snprintf(head, sizeof head, "%16.16s %4d ", participants[i].host.c_str(), participants[i].rank);
        out << head;
        for (std::size_t j = 0; j < matrix[i].size(); ++j) {
            char cell[32];
            if (i == j || std::isnan(matrix[i][j]))
                std::snprintf(cell, sizeof cell, "%9s", "-");
            else
                std::snprintf(cell, sizeof cell, "%9.*f", precision, matrix[i][j]);
            out << cell;
        }
        out << '\n';
    }
}

void print_flagged_pairs(std::ostream& out, const PairAnalysis& analysis,
                         const std::vector<PairParticipant>& participants, double flag_below,
                         const std::vector<std::vector<double>>& cpu_share) {
    char line[256];
    const auto print_median = [&](const char* kind, const std::optional<double>& median) {
        if (!median) return;
        std::snprintf(line, sizeof line, "# median bandwidth %s: %.3f GB/s\n", kind, *median);
        out << line;
    };
    print_median("within a host", analysis.median_within_host_gbps);
    print_median("across hosts", analysis.median_across_hosts_gbps);
    if (analysis.flagged.empty()) {
        std::snprintf(line, sizeof line, "# no pair below %.2f of the median of its kind\n", flag_below);
        out << line;
    } else {
        std::snprintf(line, sizeof line, "# %zu pairs below %.2f of the median of their kind:\n",
                      analysis.flagged.size(), flag_below);
        out << line;
    }
    for (const SlowPair& pair : analysis.flagged) {
        std::snprintf(line, sizeof line, "slow pair: %s -> %s: %.3f GB/s, %.2fx the median %.3f GB/s %s\n",
                      label(participants[static_cast<std::size_t>(pair.from)]).c_str(),
                      label(participants[static_cast<std::size_t>(pair.to)]).c_str(), pair.bandwidth_gbps,
                      pair.bandwidth_gbps / pair.median_gbps, pair.median_gbps,
                      pair.across_hosts ? "across hosts" : "within a host");
        out << line;
    }
    for (const SlowLatency& pair : analysis.slow_latency) {
        std::snprintf(line, sizeof line, "slow latency: %s -> %s: %.1f us, %.1fx the median %.1f us %s",
                      label(participants[static_cast<std::size_t>(pair.from)]).c_str(),
                      label(participants[static_cast<std::size_t>(pair.to)]).c_str(), pair.latency_us,
                      pair.latency_us / pair.median_us, pair.median_us, pair.across_hosts ? "across hosts" : "within a host");
        out << line;
        if (pair.asymmetric()) {
            std::snprintf(line, sizeof line, "; asymmetric: rank %d times the same exchange at %.1f us (one side "
                                             "arrives late)",
                          participants[static_cast<std::size_t>(pair.to)].rank, pair.reverse_us);
            out << line;
        }
        out << '\n';
    }
    for (const std::string& diagnosis : diagnose_pairs(analysis, participants, cpu_share)) out << "# " << diagnosis << '\n';
}

}  // namespace parbench

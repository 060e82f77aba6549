#include "report/pair_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

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

PairAnalysis flag_slow_pairs(const std::vector<std::vector<double>>& bandwidth,
                             const std::vector<PairParticipant>& participants, double flag_below) {
    PairAnalysis analysis;
    std::vector<double> within;
    std::vector<double> crossing;
    const std::size_t n = participants.size();
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j)
            if (i != j && !std::isnan(bandwidth[i][j])) (across(participants, i, j) ? crossing : within).push_back(bandwidth[i][j]);
    analysis.median_within_host_gbps = median_of(within);
    analysis.median_across_hosts_gbps = median_of(crossing);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            if (i == j || std::isnan(bandwidth[i][j])) continue;
            const bool crosses = across(participants, i, j);
            const double median = crosses ? *analysis.median_across_hosts_gbps : *analysis.median_within_host_gbps;
            if (bandwidth[i][j] < flag_below * median)
                analysis.flagged.push_back({static_cast<int>(i), static_cast<int>(j), bandwidth[i][j], median, crosses});
        }
    return analysis;
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
                                 const std::vector<std::vector<double>>& latency_us, double flag_below,
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
            {"median_bandwidth_gbps",
             {{"within_host", optional_json(analysis.median_within_host_gbps)},
              {"across_hosts", optional_json(analysis.median_across_hosts_gbps)}}},
            {"flag_below", flag_below},
            {"flagged", flagged},
            {"suspect_hosts", hosts_common_to_flagged(analysis, participants)}};
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
                         const std::vector<PairParticipant>& participants, double flag_below) {
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
        return;
    }
    std::snprintf(line, sizeof line, "# %zu pairs below %.2f of the median of their kind:\n", analysis.flagged.size(),
                  flag_below);
    out << line;
    for (const SlowPair& pair : analysis.flagged) {
        std::snprintf(line, sizeof line, "slow pair: %s -> %s: %.3f GB/s, %.2fx the median %.3f GB/s %s\n",
                      label(participants[static_cast<std::size_t>(pair.from)]).c_str(),
                      label(participants[static_cast<std::size_t>(pair.to)]).c_str(), pair.bandwidth_gbps,
                      pair.bandwidth_gbps / pair.median_gbps, pair.median_gbps,
                      pair.across_hosts ? "across hosts" : "within a host");
        out << line;
    }
    const auto suspects = hosts_common_to_flagged(analysis, participants);
    if (!suspects.empty()) {
        out << "# every slow pair involves";
        for (const auto& host : suspects) out << ' ' << host;
        out << ": check that host's link (cable, NIC, switch port, its tc/QoS settings)\n";
    }
}

}  // namespace parbench

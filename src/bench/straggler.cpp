#include "bench/straggler.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "bench/host_straggler.hpp"
#include "bench/statistics.hpp"

namespace parbench {
namespace {

// How long the others waited for the last arrival of iteration i: the mean over the other
// ranks of how much later than each of them it started.
double wait_for_last(const RankTimes& times, int iteration, int last) {
    double total = 0.0;
    for (int r = 0; r < times.ranks; ++r)
        if (r != last) total += times.arrival(last, iteration) - times.arrival(r, iteration);
    return total / static_cast<double>(times.ranks - 1);
}

int last_arrival(const RankTimes& times, int iteration) {
    int last = 0;
    for (int r = 1; r < times.ranks; ++r)
        if (times.arrival(r, iteration) > times.arrival(last, iteration)) last = r;
    return last;
}

template <typename Key>
std::pair<Key, int> most_frequent(const std::map<Key, int>& counts) {
    auto best = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it)
        if (it->second > best->second) best = it;
    return *best;
}

bool meaningful(double fraction, double wait_us, double reported_time_us) {
    return fraction >= straggler_min_fraction && wait_us >= straggler_min_wait_us &&
           wait_us >= straggler_min_share_of_time * reported_time_us;
}

}  // namespace

std::optional<StragglerFinding> find_straggler(const RankTimes& times, const std::vector<std::string>& hosts_by_rank,
                                               double reported_time_us) {
    if (times.ranks < 2 || times.iterations < 1) return std::nullopt;
    std::vector<int> last(static_cast<std::size_t>(times.iterations));
    std::map<int, int> rank_counts;
    auto host_of = [&](int rank) {
        return static_cast<std::size_t>(rank) < hosts_by_rank.size() ? hosts_by_rank[static_cast<std::size_t>(rank)]
                                                                     : std::string();
    };
    for (int i = 0; i < times.iterations; ++i) {
        last[static_cast<std::size_t>(i)] = last_arrival(times, i);
        ++rank_counts[last[static_cast<std::size_t>(i)]];
    }
    StragglerFinding finding;
    const auto [rank, rank_count] = most_frequent(rank_counts);
    finding.rank = rank;
    finding.host = host_of(rank);
    finding.fraction = static_cast<double>(rank_count) / times.iterations;

    std::vector<double> rank_waits;
    for (int i = 0; i < times.iterations; ++i) {
        const int who = last[static_cast<std::size_t>(i)];
        if (who == rank) rank_waits.push_back(wait_for_last(times, i, who));
    }
    finding.wait_us = summarize(rank_waits).median;
    finding.consistent = meaningful(finding.fraction, finding.wait_us, reported_time_us);

    // The host: its ranks' mean arrival against the other hosts', judged by the rank's bar.
    std::vector<std::vector<double>> arrival_by_rank;
    for (int r = 0; r < times.ranks; ++r) {
        arrival_by_rank.emplace_back();
        for (int i = 0; i < times.iterations; ++i) arrival_by_rank.back().push_back(times.arrival(r, i));
    }
    std::vector<std::string> hosts(static_cast<std::size_t>(times.ranks));
    for (int r = 0; r < times.ranks; ++r) hosts[static_cast<std::size_t>(r)] = host_of(r);
    HostStragglerRule host_rule;
    host_rule.min_share_of_samples = straggler_min_fraction;
    host_rule.min_excess = std::max(straggler_min_wait_us, straggler_min_share_of_time * reported_time_us);
    if (const auto slow_host = find_host_straggler(arrival_by_rank, hosts, host_rule)) {
        finding.waited_host = slow_host->host;
        finding.host_fraction = static_cast<double>(slow_host->samples_slowest) / slow_host->samples;
        finding.host_lateness_us = slow_host->excess;
        finding.host_consistent = slow_host->consistent;
    }
    return finding;
}

std::optional<std::string> run_straggler_warning(const std::vector<StragglerFinding>& findings) {
    if (findings.empty()) return std::nullopt;
    std::map<int, std::vector<double>> by_rank;
    std::map<std::string, std::vector<double>> by_host;
    for (const StragglerFinding& f : findings) {
        if (f.consistent) by_rank[f.rank].push_back(f.wait_us);
        if (f.host_consistent) by_host[f.waited_host].push_back(f.host_lateness_us);
    }
    const std::size_t needed = (findings.size() + 1) / 2;
    // Both can hold: a whole slow host usually also has one rank that is last most often; the
    // rank line says where to look first, the host line how much the host costs and what next.
    std::vector<std::string> lines;
    std::ostringstream text;
    text << std::fixed;
    text.precision(1);
    for (const auto& [rank, waits] : by_rank) {
        if (waits.size() < needed) continue;
        std::string host;
        for (const StragglerFinding& f : findings)
            if (f.rank == rank) host = f.host;
        text << "rank " << rank << " (host " << host << ") was the rank the others waited for at " << waits.size()
             << " of " << findings.size() << " points (median wait " << summarize(waits).median
             << " us): it arrives late at the collective; look for other load, a slower core or NUMA placement of "
                "that rank, or pin ranks (--bind-to core)";
        lines.push_back(text.str());
        text.str("");
        break;
    }
    for (const auto& [host, lateness] : by_host) {
        if (lateness.size() < needed) continue;
        text << "host " << host << " held the ranks the others waited for at " << lateness.size() << " of "
             << findings.size() << " points: its ranks started the collective a median "
             << summarize(lateness).median
             << " us later than those of the median other host; check that host for other load or slower cores, "
                "and run `parbench pairs --by host` to see whether its links are slow too";
        lines.push_back(text.str());
        break;
    }
    if (lines.empty()) return std::nullopt;
    return lines.size() == 1 ? lines[0] : lines[0] + "; " + lines[1];
}

}  // namespace parbench

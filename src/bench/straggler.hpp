// Which rank (and host) the others waited for. In a collective the rank everyone waits for
// has the *shortest* own time: it arrives last, and the others' timers run while they wait
// for it. So the straggler is found from arrival times on a common time base (since the
// barrier that opens each iteration, see RankTimes), not from the ranks' own times.
//
// Pure functions over RankTimes and the rank-to-host map, reusable for process groups and
// for hosts (emulated or real).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench/rank_times.hpp"

namespace parbench {

struct StragglerFinding {
    int rank = 0;                 // the rank that arrived last most often
    std::string host;             // its host
    double fraction = 0.0;        // of iterations in which it arrived last
    double wait_us = 0.0;         // median over those iterations of how long the others waited
                                  // for it (mean over the other ranks of its lateness to them)
    // The host whose ranks arrived last (bench/host_straggler.hpp: per iteration the mean
    // arrival of each host's ranks; several hosts only, else empty).
    std::string waited_host;      // the latest host most often
    double host_fraction = 0.0;   // of iterations in which it was the latest host
    double host_lateness_us = 0.0;  // median over iterations of how much later its ranks started
                                    // than those of the median other host
    bool consistent = false;      // rank: arrived last often enough, kept the others long enough
    bool host_consistent = false; // the same for waited_host, its lateness against the same bar
};

// A rank counts as the point's straggler when it arrived last in at least this share of
// the iterations and kept the others waiting for a meaningful time: at least this share of
// the point's reported time and at least the floor (below it, the barrier's own exit skew
// of about one message latency decides the order).
inline constexpr double straggler_min_fraction = 0.75;
inline constexpr double straggler_min_share_of_time = 0.25;
inline constexpr double straggler_min_wait_us = 5.0;

// Nothing for one rank or no iterations. hosts_by_rank names each rank's host.
std::optional<StragglerFinding> find_straggler(const RankTimes& times, const std::vector<std::string>& hosts_by_rank,
                                               double reported_time_us);

// Over a run's points: the rank and the host that were the consistent straggler at at least
// half of the points that have a finding, named in one warning with a fix each (for the host:
// how much later its ranks started, and `pairs` to check its links); either alone when only
// one stands out, nothing when neither does.
std::optional<std::string> run_straggler_warning(const std::vector<StragglerFinding>& findings);

}  // namespace parbench

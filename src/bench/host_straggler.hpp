// Which host is consistently the slowest. A host is as slow as its ranks: per sample (an
// iteration of a collective, a step of training) a host's figure is the mean over its ranks
// of a per-rank figure in which more means slower (train: compute time outside
// communication; collectives: how late the rank started the op after the barrier). The
// slowest host of a sample is the one with the largest figure, and it is compared with the
// median of the *other* hosts' figures, so two hosts compare directly and, with many, one
// fast host does not hide a slow one.
//
// A slow host is what a rank-level analysis misses: its ranks share the slowdown (other load
// on the host, throttled or slower cores), so each is the slowest only part of the time,
// while the host is the slowest at every sample.
//
// Pure functions over plain data, tested with literal figures.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace parbench {

// When the slowest host counts as consistent: the slowest at at least min_share_of_samples of
// at least min_samples samples (a clear majority, not a coin toss between two hosts), by a
// median excess over the other hosts' median that is above zero, at least min_excess (the
// figure's unit) and at least min_excess_share of that median.
struct HostStragglerRule {
    double min_share_of_samples = 0.75;
    int min_samples = 1;
    double min_excess = 0.0;
    double min_excess_share = 0.0;
};

struct HostStraggler {
    std::string host;               // the host that was the slowest most often
    int ranks = 0;                  // its ranks
    int samples_slowest = 0;        // samples at which it was the slowest host
    int samples = 0;
    double figure = 0.0;            // median over the samples of its figure
    double others_median = 0.0;     // median over the samples of the other hosts' median figure
    double excess = 0.0;            // median over the samples of (its figure - the others' median)
    bool consistent = false;        // by the rule it was found with
    std::vector<std::pair<std::string, double>> median_by_host;  // every host's median figure, first-rank order
};

// figure_by_rank[rank][sample]; hosts_by_rank names each rank's host. Nothing for fewer than
// two hosts, no samples, or ranks whose sample counts differ.
std::optional<HostStraggler> find_host_straggler(const std::vector<std::vector<double>>& figure_by_rank,
                                                 const std::vector<std::string>& hosts_by_rank,
                                                 const HostStragglerRule& rule);

}  // namespace parbench

// One measured (collective, size, placement) point: every rank's times, the samples they
// aggregate to, their statistics and the bandwidths derived from the reported time, in
// nccl-tests' conventions; and the closing summary of a run's points.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/rank_times.hpp"
#include "bench/statistics.hpp"
#include "bench/straggler.hpp"
#include "bench/thread_counters.hpp"
#include "core/dtype.hpp"
#include "report/verdict.hpp"

namespace parbench {

struct RankFigures {
    int rank = 0;
    std::string host;
    double median_us = 0.0;
    double mean_us = 0.0;
};

// The distribution alltoallv's blocks were drawn from (--skew, --skew-seed).
struct SkewUsed {
    std::string distribution;  // "uniform", "zipf:1.2", "hot:2"
    std::uint64_t seed = 1;
    std::string direction = "dispatch";  // or "combine" (collectives/skew.hpp ExchangeDirection)
};

// How unevenly a point's traffic falls on the ranks: the most a rank sends and receives
// against the mean over ranks, in bytes.
struct TrafficImbalance {
    struct Side {
        std::uint64_t max_bytes = 0;
        double mean_bytes = 0.0;
        int max_rank = 0;  // the (first) rank with the most
        double max_over_mean() const { return mean_bytes > 0.0 ? static_cast<double>(max_bytes) / mean_bytes : 1.0; }
    };
    Side sent;
    Side received;
};

struct CollectiveResult {
    std::string collective;
    std::uint64_t bytes = 0;            // measured size (nccl-tests' convention for the collective)
    std::uint64_t requested_bytes = 0;  // as asked; larger when rounded down to whole slices
    std::size_t count = 0;              // elements of the full buffer
    DType dtype = DType::float32;
    std::optional<ReduceOp> op;         // reducing collectives only
    std::optional<int> root;            // rooted collectives only
    bool inplace = false;
    std::optional<std::string> placement_note;  // what out of place means here, when it differs
    std::optional<std::string> one_rank_shortcut;  // what NCCL ran instead (collectives/one_rank_shortcut.hpp)
    std::optional<SkewUsed> skew;               // alltoallv only
    std::optional<TrafficImbalance> imbalance;  // alltoallv only, when measured
    Aggregation aggregation = Aggregation::max;
    std::vector<double> samples_us;     // per iteration, aggregated over ranks
    Summary time_us;
    double reported_time_us = 0.0;      // median of the samples (mean for rank-mean)
    std::vector<AggregateTime> aggregates;  // the reported time under every aggregation
    std::vector<RankFigures> per_rank;
    FullStatistics full;                // OSU's -f: fastest and slowest rank, p95 and its rank
    std::optional<StragglerFinding> straggler;
    double bus_factor = 1.0;
    double algbw_gbps = 0.0;            // bytes / reported time, decimal GB/s
    double busbw_gbps = 0.0;            // algbw x bus_factor
    std::optional<std::uint64_t> wrong; // when checked
    std::size_t outliers = 0;
    std::vector<Warning> warnings;
    std::optional<std::string> skipped; // why the point was not measured
    std::optional<int> repetition;      // --repeat K: which whole sweep (from 1) measured it
    // Every rank's page faults and involuntary switches across the timed loop, and the
    // calls each rank ran there (bench/thread_counters.hpp).
    std::vector<ThreadCounters> counters_by_rank;
    std::uint64_t counted_calls = 0;
    nlohmann::json groups;              // with --groups: every group's figures and the minimum (cli/collective_groups.hpp)
    std::optional<PointVerdict> verdict;  // against the expected value, when the run has a model (--cluster, --expect-host)
    nlohmann::json extra;                 // keys of the run's options: "background", "nccl_choice" (cli/)
};

// Fills samples, statistics, per-rank figures, the straggler and bandwidths from every
// rank's times (bytes, bus_factor and aggregation already set).
void derive_statistics(CollectiveResult& result, const RankTimes& times, const std::vector<std::string>& hosts_by_rank);
nlohmann::json to_json(const CollectiveResult& result);
// Records the timed loop's counters and adds their warnings ("page-faults", "preempted").
void add_thread_counters(CollectiveResult& result, std::vector<ThreadCounters> by_rank, std::uint64_t calls_per_rank);

// The closing lines of a run, as nccl-tests prints them, with what they average over said.
struct RunSummary {
    std::size_t measured_points = 0;
    std::size_t measured_sizes = 0;       // distinct sizes (as asked for) among the measured points
    std::size_t measured_collectives = 0;
    std::size_t measured_cases = 0;       // most (type, op, root) cases of one collective: several under -d/-o/-r all
    std::size_t measured_sweeps = 1;      // --repeat K: the whole sweeps with a measured point
    bool both_placements = false;         // points measured out of place and in place
    std::size_t warned_points = 0;        // measured points with at least one warning
    bool checked = false;
    std::uint64_t wrong_total = 0;
    std::optional<double> average_busbw_gbps;  // mean over the measured points (sizes), not a peak
    struct Peak {
        double busbw_gbps = 0.0;
        std::string collective;
        std::uint64_t bytes = 0;
        bool inplace = false;
    };
    std::optional<Peak> peak;
    std::map<std::string, std::size_t> warning_points;  // kind -> points that drew it
    std::optional<std::string> straggler_warning;
};
RunSummary summarize_run(const std::vector<CollectiveResult>& results, bool checked);

// A floor on the run's average busbw (nccl-tests' NCCL_TESTS_MIN_BW): `source` names where it
// came from, "--min-busbw" or "NCCL_TESTS_MIN_BW".
struct BusbwGate {
    double gbps = 0.0;
    std::string source;
};
// Why the run fails the gate ("average busbw 1.10 GB/s is below 5.00 GB/s (--min-busbw)"), or
// nullopt when it passes or there is no gate.
std::optional<std::string> busbw_gate_failure(const RunSummary& summary, const std::optional<BusbwGate>& gate);
nlohmann::json to_json(const RunSummary& summary);

}  // namespace parbench

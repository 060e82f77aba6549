// Every rank's timings of one point, and the ways of turning them into one time per
// point. Pure functions over plain data, so the aggregation modes are tested with literal
// per-rank times and later users (process groups, emulated hosts) reuse them as they are.
//
// The tools users compare with aggregate differently (their sources, read for method):
//   - parbench's default, `max`: per iteration, the slowest rank (a collective is done when
//     its last rank is), then the median over iterations;
//   - `mean`: per iteration, the mean over ranks, then the median over iterations;
//   - `rank-mean`: each rank's mean over iterations, then the mean over ranks. It is the
//     mean of the `mean` samples (means commute), reported as a mean: IMB-MPI1's t_avg and
//     the OSU benchmarks' "Avg Latency"; nccl-tests' default (-a 1) with its batched loop;
//   - `rank-max`: each rank's mean over iterations, then the max over ranks: IMB-MPI1's
//     t_max, OSU's "Max Latency", nccl-tests' -a 3;
//   - `rank-min`: each rank's mean over iterations, then the min over ranks: IMB-MPI1's
//     t_min, OSU's "Min Latency", nccl-tests' -a 2 (the fastest rank: it hides the slowest);
//   - `rank0`: rank 0's own time per iteration, then the median.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parbench {

enum class Aggregation { max, mean, rank_mean, rank_max, rank_min, rank0 };
// "max", "mean", "rank-mean", "rank-max", "rank-min", "rank0"
std::string_view aggregation_name(Aggregation aggregation);
std::optional<Aggregation> parse_aggregation(std::string_view name);
std::vector<Aggregation> all_aggregations();

// Times in microseconds, rank-major: value(rank, iteration) = values[rank * iterations + iteration].
// `arrival_us` and `finish_us` are on a common time base: microseconds since the rank left
// the barrier that opens the iteration (every rank leaves it within about one small-message
// latency of the others, so no clock synchronisation across hosts is needed).
struct RankTimes {
    int ranks = 0;
    int iterations = 0;
    std::vector<double> own_us;      // the rank's own timer: its time inside the op
    std::vector<double> arrival_us;  // when the rank started the op
    std::vector<double> finish_us;   // when the rank's op ended

    double own(int rank, int iteration) const { return own_us[index(rank, iteration)]; }
    double arrival(int rank, int iteration) const { return arrival_us[index(rank, iteration)]; }
    double finish(int rank, int iteration) const { return finish_us[index(rank, iteration)]; }
    std::span<const double> own_of_rank(int rank) const {
        return std::span<const double>(own_us).subspan(index(rank, 0), static_cast<std::size_t>(iterations));
    }

  private:
    std::size_t index(int rank, int iteration) const {
        return static_cast<std::size_t>(rank) * static_cast<std::size_t>(iterations) + static_cast<std::size_t>(iteration);
    }
};

// One sample per iteration: the max or mean over ranks, or rank 0's time. `rank-mean`
// gives the per-iteration mean (whose mean is its reported time), `rank-max` the
// per-iteration max and `rank-min` the per-iteration min (their reported times, a max or min
// of means, have no per-iteration form).
std::vector<double> aggregate_samples(const RankTimes& times, Aggregation aggregation);

// The one time a point is reported at (and algbw computed from): the median of the
// samples; for rank-mean, rank-max and rank-min the mean, max or min over ranks of each
// rank's mean.
double reported_time(const RankTimes& times, Aggregation aggregation);
// "median", "mean of rank means", "max of rank means", "min of rank means"
std::string_view reported_statistic(Aggregation aggregation);

// The reported time under every mode, so a report lines up with any tool's convention.
struct AggregateTime {
    Aggregation aggregation;
    double time_us;
};
std::vector<AggregateTime> every_aggregation(const RankTimes& times);

struct RankSummary {
    int rank = 0;
    double median_us = 0.0;
    double mean_us = 0.0;
};
std::vector<RankSummary> per_rank_summaries(const RankTimes& times);

// OSU's full statistics (osu_latency -f, "--full"): the fastest and the slowest rank's mean
// time (OSU's Min and Max Latency, IMB-MPI1's t_min and t_max) with the rank each is, and the
// 95th percentile of the samples with the rank that was slowest in that iteration (the one
// the others waited for). The percentile is nearest-rank (ceil(0.95 n)-th smallest), so it
// is a measured sample and has a rank; the report's time_us.p95 interpolates.
struct TimeOfRank {
    double time_us = 0.0;
    int rank = 0;
};
struct FullStatistics {
    TimeOfRank fastest_rank;  // min over ranks of each rank's mean
    TimeOfRank slowest_rank;  // max over ranks of each rank's mean
    TimeOfRank p95;           // of `samples`; rank: the slowest in that iteration
    int p95_iteration = 0;
};
// `samples`: aggregate_samples(times, aggregation) of the point.
FullStatistics full_statistics(const RankTimes& times, std::span<const double> samples);

}  // namespace parbench

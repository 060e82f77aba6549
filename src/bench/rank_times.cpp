#include "bench/rank_times.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <utility>

#include "bench/statistics.hpp"

namespace parbench {
namespace {

constexpr std::array<std::pair<Aggregation, std::string_view>, 6> names{{
    {Aggregation::max, "max"},
    {Aggregation::mean, "mean"},
    {Aggregation::rank_mean, "rank-mean"},
    {Aggregation::rank_max, "rank-max"},
    {Aggregation::rank_min, "rank-min"},
    {Aggregation::rank0, "rank0"},
}};

double mean_of(std::span<const double> values) {
    if (values.empty()) return 0.0;
    return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

}  // namespace

std::string_view aggregation_name(Aggregation aggregation) {
    for (const auto& [value, name] : names)
        if (value == aggregation) return name;
    return "max";
}

std::optional<Aggregation> parse_aggregation(std::string_view name) {
    for (const auto& [value, text] : names)
        if (text == name) return value;
    return std::nullopt;
}

std::vector<Aggregation> all_aggregations() {
    std::vector<Aggregation> all;
    for (const auto& entry : names) all.push_back(entry.first);
    return all;
}

std::vector<double> aggregate_samples(const RankTimes& times, Aggregation aggregation) {
    std::vector<double> samples(static_cast<std::size_t>(times.iterations));
    for (int i = 0; i < times.iterations; ++i) {
        double value = 0.0;
        if (aggregation == Aggregation::rank0) {
            value = times.own(0, i);
        } else if (aggregation == Aggregation::max || aggregation == Aggregation::rank_max) {
            value = times.own(0, i);
            for (int r = 1; r < times.ranks; ++r) value = std::max(value, times.own(r, i));
        } else if (aggregation == Aggregation::rank_min) {
            value = times.own(0, i);
            for (int r = 1; r < times.ranks; ++r) value = std::min(value, times.own(r, i));
        } else {  // mean and rank-mean
            for (int r = 0; r < times.ranks; ++r) value += times.own(r, i);
            value /= static_cast<double>(times.ranks);
        }
        samples[static_cast<std::size_t>(i)] = value;
    }
    return samples;
}

double reported_time(const RankTimes& times, Aggregation aggregation) {
    if (aggregation == Aggregation::rank_mean || aggregation == Aggregation::rank_max ||
        aggregation == Aggregation::rank_min) {
        std::vector<double> rank_means;
        for (int r = 0; r < times.ranks; ++r) rank_means.push_back(mean_of(times.own_of_rank(r)));
        if (rank_means.empty()) return 0.0;
        if (aggregation == Aggregation::rank_mean) return mean_of(rank_means);
        return aggregation == Aggregation::rank_max ? *std::max_element(rank_means.begin(), rank_means.end())
                                                    : *std::min_element(rank_means.begin(), rank_means.end());
    }
    return summarize(aggregate_samples(times, aggregation)).median;
}

std::string_view reported_statistic(Aggregation aggregation) {
    if (aggregation == Aggregation::rank_mean) return "mean of rank means";
    if (aggregation == Aggregation::rank_max) return "max of rank means";
    if (aggregation == Aggregation::rank_min) return "min of rank means";
    return "median";
}

std::vector<AggregateTime> every_aggregation(const RankTimes& times) {
    std::vector<AggregateTime> all;
    for (Aggregation aggregation : all_aggregations()) all.push_back({aggregation, reported_time(times, aggregation)});
    return all;
}

std::vector<RankSummary> per_rank_summaries(const RankTimes& times) {
    std::vector<RankSummary> summaries;
    for (int r = 0; r < times.ranks; ++r) {
        const Summary summary = summarize(times.own_of_rank(r));
        summaries.push_back({r, summary.median, summary.mean});
    }
    return summaries;
}

FullStatistics full_statistics(const RankTimes& times, std::span<const double> samples) {
    FullStatistics full;
    for (int r = 0; r < times.ranks; ++r) {
        const double mean = mean_of(times.own_of_rank(r));
        if (r == 0 || mean < full.fastest_rank.time_us) full.fastest_rank = {mean, r};
        if (r == 0 || mean > full.slowest_rank.time_us) full.slowest_rank = {mean, r};
    }
    if (samples.empty()) return full;
    std::vector<int> order(samples.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return samples[static_cast<std::size_t>(a)] < samples[static_cast<std::size_t>(b)];
    });
    // Nearest rank: the smallest sample with at least 95 % of the samples at or below it.
    const auto nearest = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(samples.size()) - 1e-9));
    const int iteration = order[std::max<std::size_t>(nearest, 1) - 1];
    int slowest = 0;
    for (int r = 1; r < times.ranks; ++r)
        if (times.own(r, iteration) > times.own(slowest, iteration)) slowest = r;
    full.p95 = {samples[static_cast<std::size_t>(iteration)], slowest};
    full.p95_iteration = iteration;
    return full;
}

}  // namespace parbench

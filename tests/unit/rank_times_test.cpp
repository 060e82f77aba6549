// The aggregation modes and the straggler analysis on scripted per-rank times, where every
// answer is known by hand.
#include "bench/rank_times.hpp"
#include "bench/straggler.hpp"

#include <gtest/gtest.h>

namespace parbench {
namespace {

// Three ranks, four iterations; rank 2 is fast in its own time (it arrives late).
RankTimes scripted() {
    RankTimes times;
    times.ranks = 3;
    times.iterations = 4;
    times.own_us = {10, 12, 14, 16,   // rank 0
                    20, 10, 30, 40,   // rank 1
                    1,  2,  3,  6};   // rank 2
    times.arrival_us.assign(12, 0.0);
    times.finish_us.assign(12, 0.0);
    return times;
}

TEST(Aggregation, NamesRoundTrip) {
    for (Aggregation a : all_aggregations()) EXPECT_EQ(parse_aggregation(aggregation_name(a)), a);
    EXPECT_EQ(parse_aggregation("rank-mean"), Aggregation::rank_mean);
    EXPECT_FALSE(parse_aggregation("median"));
}

TEST(Aggregation, MaxIsPerIterationSlowestRank) {
    const auto samples = aggregate_samples(scripted(), Aggregation::max);
    EXPECT_EQ(samples, (std::vector<double>{20, 12, 30, 40}));
    EXPECT_DOUBLE_EQ(reported_time(scripted(), Aggregation::max), 25.0);  // median of 12 20 30 40
}

TEST(Aggregation, MeanIsPerIterationMeanOverRanks) {
    const auto samples = aggregate_samples(scripted(), Aggregation::mean);
    EXPECT_EQ(samples, (std::vector<double>{31.0 / 3, 8, 47.0 / 3, 62.0 / 3}));
    EXPECT_DOUBLE_EQ(reported_time(scripted(), Aggregation::mean), (31.0 / 3 + 47.0 / 3) / 2);
}

TEST(Aggregation, RankMeanIsTheMeanOfEachRanksMean) {
    // Rank means 13, 25, 3; their mean 41/3 (IMB's t_avg, OSU's average).
    const RankTimes times = scripted();
    const auto samples = aggregate_samples(times, Aggregation::rank_mean);
    EXPECT_DOUBLE_EQ(reported_time(times, Aggregation::rank_mean), 41.0 / 3);
    EXPECT_DOUBLE_EQ((samples[0] + samples[1] + samples[2] + samples[3]) / 4, 41.0 / 3);  // means commute
    EXPECT_EQ(reported_statistic(Aggregation::rank_mean), "mean of rank means");
    const auto ranks = per_rank_summaries(times);
    ASSERT_EQ(ranks.size(), 3u);
    EXPECT_DOUBLE_EQ(ranks[0].mean_us, 13.0);
    EXPECT_DOUBLE_EQ(ranks[1].mean_us, 25.0);
    EXPECT_DOUBLE_EQ(ranks[2].mean_us, 3.0);
    EXPECT_DOUBLE_EQ(ranks[1].median_us, 25.0);
    EXPECT_DOUBLE_EQ(ranks[2].median_us, 2.5);
}

TEST(Aggregation, RankMaxIsTheLargestRankMean) {
    // IMB's t_max: rank 1's mean 25 (here equal to the median of per-iteration maxima).
    EXPECT_DOUBLE_EQ(reported_time(scripted(), Aggregation::rank_max), 25.0);
    RankTimes times = scripted();
    times.own_us[0] = 100;  // rank 0: 100 12 14 16, mean 35.5 > rank 1's 25
    EXPECT_DOUBLE_EQ(reported_time(times, Aggregation::rank_max), 35.5);
    EXPECT_DOUBLE_EQ(reported_time(times, Aggregation::max), 35.0);  // maxima 100 12 30 40: median 35
}

TEST(Aggregation, Rank0IsRankZerosOwnTime) {
    const auto samples = aggregate_samples(scripted(), Aggregation::rank0);
    EXPECT_EQ(samples, (std::vector<double>{10, 12, 14, 16}));
    EXPECT_DOUBLE_EQ(reported_time(scripted(), Aggregation::rank0), 13.0);
}

TEST(Aggregation, RankMinIsTheSmallestRankMean) {
    // IMB's t_min, OSU's Min Latency, nccl-tests' -a 2: rank 2's mean 3.
    EXPECT_DOUBLE_EQ(reported_time(scripted(), Aggregation::rank_min), 3.0);
    EXPECT_EQ(aggregate_samples(scripted(), Aggregation::rank_min), (std::vector<double>{1, 2, 3, 6}));
    EXPECT_EQ(reported_statistic(Aggregation::rank_min), "min of rank means");
}

TEST(Aggregation, EveryModeIsRecorded) {
    const auto all = every_aggregation(scripted());
    ASSERT_EQ(all.size(), 6u);
    EXPECT_DOUBLE_EQ(all[0].time_us, 25.0);
    EXPECT_DOUBLE_EQ(all[2].time_us, 41.0 / 3);
    EXPECT_DOUBLE_EQ(all[3].time_us, 25.0);
    EXPECT_DOUBLE_EQ(all[4].time_us, 3.0);
    EXPECT_DOUBLE_EQ(all[5].time_us, 13.0);
}

TEST(FullStatistics, FastestAndSlowestRankMeansWithTheirRanks) {
    const RankTimes times = scripted();
    const FullStatistics full = full_statistics(times, aggregate_samples(times, Aggregation::max));
    EXPECT_DOUBLE_EQ(full.fastest_rank.time_us, 3.0);  // OSU's Min Latency
    EXPECT_EQ(full.fastest_rank.rank, 2);
    EXPECT_DOUBLE_EQ(full.slowest_rank.time_us, 25.0);  // OSU's Max Latency
    EXPECT_EQ(full.slowest_rank.rank, 1);
}

TEST(FullStatistics, P95IsANearestRankSampleWithTheRankSlowestInIt) {
    // Samples (max over ranks) 20 12 30 40: ceil(0.95 x 4) = 4th smallest, 40, iteration 3,
    // where rank 1 (40) was slowest.
    const RankTimes times = scripted();
    const FullStatistics full = full_statistics(times, aggregate_samples(times, Aggregation::max));
    EXPECT_DOUBLE_EQ(full.p95.time_us, 40.0);
    EXPECT_EQ(full.p95.rank, 1);
    EXPECT_EQ(full.p95_iteration, 3);
    // Twenty samples: the 19th smallest, not the largest.
    RankTimes twenty;
    twenty.ranks = 2;
    twenty.iterations = 20;
    for (int r = 0; r < 2; ++r)
        for (int i = 0; i < 20; ++i) twenty.own_us.push_back(r == 0 ? i + 1.0 : 0.5);
    const FullStatistics of_twenty = full_statistics(twenty, aggregate_samples(twenty, Aggregation::max));
    EXPECT_DOUBLE_EQ(of_twenty.p95.time_us, 19.0);
    EXPECT_EQ(of_twenty.p95.rank, 0);
    EXPECT_EQ(of_twenty.p95_iteration, 18);
}

// Four ranks on two hosts; rank 3 arrives 100 us late in three of four iterations.
RankTimes late_rank_three() {
    RankTimes times;
    times.ranks = 4;
    times.iterations = 4;
    times.own_us.assign(16, 110.0);
    times.finish_us.assign(16, 120.0);
    times.arrival_us = {0, 1, 0, 0,  //
                        2, 0, 3, 0,  //
                        1, 1, 1, 50, //
                        100, 2, 101, 0};
    return times;
}

const std::vector<std::string> two_hosts{"a", "a", "b", "b"};

TEST(Straggler, TheLastArrivalMostOftenIsNamedWithItsWait) {
    const auto finding = find_straggler(late_rank_three(), two_hosts, 110.0);
    ASSERT_TRUE(finding);
    EXPECT_EQ(finding->rank, 3);
    EXPECT_EQ(finding->host, "b");
    EXPECT_DOUBLE_EQ(finding->fraction, 0.75);
    // Iteration 0: 100 - (0 + 2 + 1) / 3 = 99; iteration 2: 101 - (0 + 3 + 1) / 3 = 99.67;
    // iteration 1: 2 - (1 + 0 + 1) / 3 = 1.33. Median 99.
    EXPECT_NEAR(finding->wait_us, 99.0, 1e-9);
    EXPECT_TRUE(finding->consistent);
    EXPECT_EQ(finding->waited_host, "b");
    // Per iteration the mean arrival of b's ranks (2, 3) against a's (0, 1): 50.5 - 1,
    // 1.5 - 0.5, 51 - 1.5, 25 - 0: b is later in all four, median lateness (25 + 49.5) / 2.
    EXPECT_DOUBLE_EQ(finding->host_fraction, 1.0);
    EXPECT_DOUBLE_EQ(finding->host_lateness_us, 37.25);
    EXPECT_TRUE(finding->host_consistent);
}

TEST(Straggler, ShortWaitsOrRareLatenessAreNotConsistent) {
    // The same arrivals, but an op so long that 99 us is under a quarter of it.
    EXPECT_FALSE(find_straggler(late_rank_three(), two_hosts, 1000.0)->consistent);
    RankTimes times = late_rank_three();
    for (double& a : times.arrival_us) a /= 100.0;  // ~1 us: barrier exit skew, below the floor
    EXPECT_FALSE(find_straggler(times, two_hosts, 1.0)->consistent);
    // One host only: no host finding.
    EXPECT_FALSE(find_straggler(late_rank_three(), {"a", "a", "a", "a"}, 110.0)->host_consistent);
}

TEST(Straggler, NothingForOneRank) {
    RankTimes times;
    times.ranks = 1;
    times.iterations = 3;
    times.own_us = times.arrival_us = times.finish_us = {1, 2, 3};
    EXPECT_FALSE(find_straggler(times, {"a"}, 2.0));
}

TEST(Straggler, RunWarningNamesTheRankConsistentAtHalfThePoints) {
    StragglerFinding late;
    late.rank = 3;
    late.host = "b";
    late.wait_us = 99.0;
    late.consistent = true;
    StragglerFinding quiet;
    quiet.rank = 0;
    quiet.host = "a";
    EXPECT_FALSE(run_straggler_warning({}));
    EXPECT_FALSE(run_straggler_warning({late, quiet, quiet}));
    const auto warning = run_straggler_warning({late, late, quiet});
    ASSERT_TRUE(warning);
    EXPECT_NE(warning->find("rank 3 (host b)"), std::string::npos) << *warning;
    EXPECT_NE(warning->find("2 of 3 points"), std::string::npos) << *warning;
    // Different ranks of one host, each consistent at the host level only: the host is named.
    StragglerFinding host_only;
    host_only.waited_host = "b";
    host_only.host_lateness_us = 40.0;
    host_only.host_consistent = true;
    const auto host_warning = run_straggler_warning({host_only, host_only, quiet});
    ASSERT_TRUE(host_warning);
    EXPECT_EQ(host_warning->rfind("host b", 0), 0u) << *host_warning;
    EXPECT_NE(host_warning->find("2 of 3 points"), std::string::npos) << *host_warning;
    EXPECT_NE(host_warning->find("a median 40.0 us later than those of the median other host"), std::string::npos)
        << *host_warning;
    EXPECT_NE(host_warning->find("parbench pairs --by host"), std::string::npos) << *host_warning;
    // A rank and its host both consistent: one warning names both, the rank first.
    StragglerFinding late_on_late_host = late;
    late_on_late_host.waited_host = "b";
    late_on_late_host.host_lateness_us = 30.0;
    late_on_late_host.host_consistent = true;
    const auto both = run_straggler_warning({late_on_late_host, late_on_late_host, quiet});
    ASSERT_TRUE(both);
    EXPECT_EQ(both->rfind("rank 3 (host b)", 0), 0u) << *both;
    EXPECT_NE(both->find("; host b held the ranks the others waited for at 2 of 3 points"), std::string::npos)
        << *both;
}

}  // namespace
}  // namespace parbench

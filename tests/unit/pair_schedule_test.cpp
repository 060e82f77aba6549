// The all-pairs rounds and the slow-pair analysis, on literal inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "bench/pair_schedule.hpp"
#include "report/pair_matrix.hpp"

namespace parbench {
namespace {

TEST(PairSchedule, EveryPairOnceEachRankOncePerRound) {
    for (int n = 2; n <= 9; ++n) {
        const auto rounds = round_robin_rounds(n);
        EXPECT_EQ(static_cast<int>(rounds.size()), n % 2 == 0 ? n - 1 : n) << "n = " << n;
        std::set<std::pair<int, int>> seen;
        for (const auto& pairs : rounds) {
            std::set<int> busy;
            for (const auto& [a, b] : pairs) {
                EXPECT_LT(a, b);
                EXPECT_TRUE(busy.insert(a).second) << "rank " << a << " twice in a round, n = " << n;
                EXPECT_TRUE(busy.insert(b).second) << "rank " << b << " twice in a round, n = " << n;
                EXPECT_TRUE(seen.insert({a, b}).second) << a << "-" << b << " met twice, n = " << n;
            }
        }
        EXPECT_EQ(static_cast<int>(seen.size()), n * (n - 1) / 2) << "n = " << n;
    }
    EXPECT_TRUE(round_robin_rounds(1).empty());
}

const double nan = std::nan("");
// Latencies alike everywhere: these tests judge bandwidth.
const std::vector<std::vector<double>> even_latency(4, std::vector<double>(4, 1.0));

TEST(PairMatrix, FlagsTheSlowHostsPairsOnly) {
    // Four hosts, one rank each; host d's link is 10x slower.
    const std::vector<PairParticipant> who = {{0, "a"}, {1, "b"}, {2, "c"}, {3, "d"}};
    const std::vector<std::vector<double>> bw = {
        {nan, 1.0, 0.9, 0.1}, {1.1, nan, 1.0, 0.1}, {0.9, 1.0, nan, 0.12}, {0.1, 0.09, 0.1, nan}};
    const PairAnalysis analysis = flag_slow_pairs(bw, even_latency, who, 0.8);
    ASSERT_EQ(analysis.flagged.size(), 6u);
    for (const SlowPair& pair : analysis.flagged) {
        EXPECT_TRUE(pair.from == 3 || pair.to == 3);
        EXPECT_TRUE(pair.across_hosts);
    }
    EXPECT_FALSE(analysis.median_within_host_gbps);
    EXPECT_EQ(hosts_common_to_flagged(analysis, who), std::vector<std::string>{"d"});
}

TEST(PairMatrix, JudgesPairsInsideAHostAgainstTheirOwnKind) {
    // Two hosts of two ranks: shared memory at ~10 GB/s, the network at ~1: nothing is slow.
    const std::vector<PairParticipant> who = {{0, "a"}, {1, "a"}, {2, "b"}, {3, "b"}};
    const std::vector<std::vector<double>> bw = {
        {nan, 10.0, 1.0, 1.1}, {9.0, nan, 1.0, 0.9}, {1.0, 1.0, nan, 11.0}, {1.0, 0.95, 10.0, nan}};
    const PairAnalysis analysis = flag_slow_pairs(bw, even_latency, who, 0.8);
    EXPECT_TRUE(analysis.flagged.empty());
    ASSERT_TRUE(analysis.median_within_host_gbps);
    EXPECT_DOUBLE_EQ(*analysis.median_within_host_gbps, 10.0);
    EXPECT_TRUE(hosts_common_to_flagged(analysis, who).empty());
}

TEST(PairMatrix, AHostInEverySlowPairIsNamedAlone) {
    // d is in all four slow pairs (0->3, 2->3, 3->0, 3->1), a in half of them only as d's
    // partner: d is named alone, not "a d" (as on the emulated cluster with a throttled d).
    const std::vector<PairParticipant> who = {{0, "a"}, {1, "b"}, {2, "c"}, {3, "d"}};
    const std::vector<std::vector<double>> bw = {
        {nan, 1.0, 1.0, 0.1}, {1.0, nan, 1.0, 1.0}, {1.0, 1.0, nan, 0.1}, {0.1, 0.1, 1.0, nan}};
    const PairAnalysis analysis = flag_slow_pairs(bw, even_latency, who, 0.8);
    ASSERT_EQ(analysis.flagged.size(), 4u);
    EXPECT_EQ(hosts_common_to_flagged(analysis, who), std::vector<std::string>{"d"});
}

TEST(PairMatrix, NamesNoHostWhenTheSlowPairsShareNone) {
    const std::vector<PairParticipant> who = {{0, "a"}, {1, "b"}, {2, "c"}, {3, "d"}};
    const std::vector<std::vector<double>> bw = {
        {nan, 0.1, 1.0, 1.0}, {0.1, nan, 1.0, 1.0}, {1.0, 1.0, nan, 0.1}, {1.0, 1.0, 0.1, nan}};
    const PairAnalysis analysis = flag_slow_pairs(bw, even_latency, who, 0.8);
    EXPECT_EQ(analysis.flagged.size(), 4u);
    EXPECT_TRUE(hosts_common_to_flagged(analysis, who).empty());
}

}  // namespace
}  // namespace parbench

// alltoallv's per-destination blocks (collectives/skew.hpp): docs/collectives.md's definitions, checked
// with figures worked out by hand, and every refusal of --skew.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "collectives/collective.hpp"
#include "collectives/skew.hpp"
#include "core/error.hpp"

namespace parbench {
namespace {

std::size_t total(const std::vector<std::size_t>& counts) {
    return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

// The blocks in popularity order (most popular first), so a test reads the weights.
std::vector<std::size_t> by_popularity(const std::vector<std::size_t>& counts, std::uint64_t seed) {
    std::vector<std::size_t> sorted;
    for (int rank : popularity_order(static_cast<int>(counts.size()), seed))
        sorted.push_back(counts[static_cast<std::size_t>(rank)]);
    return sorted;
}

TEST(Skew, ParsesTheThreeForms) {
    EXPECT_EQ(parse_skew("uniform", 1).kind, Skew::Kind::uniform);
    const Skew zipf = parse_skew("zipf:1.5", 7);
    EXPECT_EQ(zipf.kind, Skew::Kind::zipf);
    EXPECT_DOUBLE_EQ(zipf.exponent, 1.5);
    EXPECT_EQ(zipf.seed, 7u);
    EXPECT_EQ(skew_name(zipf), "zipf:1.5");
    const Skew hot = parse_skew("hot:3", 1);
    EXPECT_EQ(hot.kind, Skew::Kind::hot);
    EXPECT_EQ(hot.hot, 3);
    EXPECT_EQ(skew_name(hot), "hot:3");
    EXPECT_EQ(skew_name(parse_skew("zipf:0", 1)), "zipf:0");
}

// Issue 32: a six-digit name made zipf:1.000004 read as zipf:1 in the ranks' agreement, the
// reports and compare; the name now reads back as the exponent it was parsed to.
TEST(Skew, TheNameCarriesTheExactExponent) {
    EXPECT_EQ(skew_name(parse_skew("zipf:1.000004", 1)), "zipf:1.000004");
    EXPECT_EQ(skew_name(parse_skew("zipf:1", 1)), "zipf:1");
    EXPECT_NE(skew_name(parse_skew("zipf:1.0000000000000002", 1)), skew_name(parse_skew("zipf:1", 1)));
    for (const char* text : {"zipf:0.1", "zipf:1.2345678901234567", "zipf:3e-09"}) {
        const Skew parsed = parse_skew(text, 1);
        EXPECT_EQ(parse_skew(skew_name(parsed), 1).exponent, parsed.exponent) << text;
    }
}

TEST(Skew, DirectionParsesBothAndRefusesTheRestNamingTheFlag) {
    EXPECT_EQ(parse_direction("dispatch"), ExchangeDirection::dispatch);
    EXPECT_EQ(parse_direction("combine"), ExchangeDirection::combine);
    EXPECT_EQ(direction_name(ExchangeDirection::combine), "combine");
    EXPECT_EQ(direction_name(ExchangeDirection::dispatch), "dispatch");
    for (const char* text : {"", "Combine", "both", "transpose"}) {
        try {
            parse_direction(text);
            ADD_FAILURE() << "accepted '" << text << "'";
        } catch (const UsageError& error) {
            EXPECT_NE(std::string(error.what()).find("--direction"), std::string::npos) << error.what();
        }
    }
}

TEST(Skew, RefusesMalformedAndOutOfRangeNamingTheFlag) {
    for (const char* text : {"", "zipf", "zipf:", "zipf:-1", "zipf:x", "zipf:1.2x", "zipf:inf", "zipf:nan", "hot",
                             "hot:", "hot:0", "hot:-2", "hot:1.5", "hot:99999999999", "gauss:1", "Uniform"}) {
        try {
            parse_skew(text, 1);
            ADD_FAILURE() << "accepted '" << text << "'";
        } catch (const UsageError& error) {
            EXPECT_NE(std::string(error.what()).find("--skew"), std::string::npos) << error.what();
        }
    }
    // K above the rank count is known only once the ranks are.
    const Skew hot = parse_skew("hot:5", 1);
    EXPECT_FALSE(skew_refusal(hot, 5));
    ASSERT_TRUE(skew_refusal(hot, 4));
    EXPECT_NE(skew_refusal(hot, 4)->find("--skew hot:5"), std::string::npos);
    EXPECT_NE(skew_refusal(hot, 4)->find("from 1 to 4"), std::string::npos);
    EXPECT_FALSE(skew_refusal(parse_skew("zipf:3", 1), 1));
}

TEST(Skew, PopularityOrderIsASeededPermutation) {
    for (int n : {1, 2, 3, 4, 17}) {
        const std::vector<int> order = popularity_order(n, 42);
        EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), static_cast<std::size_t>(n));
        EXPECT_EQ(*std::min_element(order.begin(), order.end()), 0);
        EXPECT_EQ(*std::max_element(order.begin(), order.end()), n - 1);
        EXPECT_EQ(order, popularity_order(n, 42));  // the same on every call, so on every rank
    }
    std::set<std::vector<int>> orders;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) orders.insert(popularity_order(8, seed));
    EXPECT_GT(orders.size(), 15u);  // seeds give different hot ranks
}

TEST(Skew, EveryRankSendsItsWholeCount) {
    for (const char* text : {"uniform", "zipf:0.7", "zipf:1", "zipf:3", "zipf:500", "hot:1", "hot:2"})
        for (int n : {2, 3, 4, 7, 64})
            for (std::size_t count : {0u, 1u, 5u, 1001u, 1u << 20}) {
                const Skew skew = parse_skew(text, 3);
                if (skew_refusal(skew, n)) continue;
                const auto counts = destination_counts(count, n, skew);
                ASSERT_EQ(counts.size(), static_cast<std::size_t>(n));
                EXPECT_EQ(total(counts), count) << text << " n " << n << " count " << count;
            }
}

TEST(Skew, UniformIsTheEvenAlltoall) {
    EXPECT_EQ(destination_counts(400, 4, parse_skew("uniform", 9)), std::vector<std::size_t>(4, 100));
    // 10 over 4: the two extra elements go to the two most popular ranks.
    const auto counts = destination_counts(10, 4, parse_skew("uniform", 9));
    EXPECT_EQ(by_popularity(counts, 9), (std::vector<std::size_t>{3, 3, 2, 2}));
    // zipf:0 and hot:n weigh every destination alike too.
    EXPECT_EQ(destination_counts(10, 4, parse_skew("zipf:0", 9)), counts);
    EXPECT_EQ(destination_counts(10, 4, parse_skew("hot:4", 9)), counts);
}

// hot:K: the K first in the order share 90%, the others 10%, each group evenly.
TEST(Skew, HotDestinationsGetNinetyPercent) {
    // n 4, K 1: 900 to the hot rank, 100 / 3 to each cold one (34, 33, 33: largest remainder).
    EXPECT_EQ(by_popularity(destination_counts(1000, 4, parse_skew("hot:1", 5)), 5),
              (std::vector<std::size_t>{900, 34, 33, 33}));
    // n 4, K 2: 450 each hot, 50 each cold.
    EXPECT_EQ(by_popularity(destination_counts(1000, 4, parse_skew("hot:2", 5)), 5),
              (std::vector<std::size_t>{450, 450, 50, 50}));
    // n 10, K 9: 90% over 9 is 10% each, the cold one 10%: even, as K > 0.9 n would invert.
    EXPECT_EQ(destination_counts(1000, 10, parse_skew("hot:9", 5)), std::vector<std::size_t>(10, 100));
    // n 20, K 19: 0.9/19 < 0.1, so every destination weighs the same rather than hot < cold.
    EXPECT_EQ(destination_counts(2000, 20, parse_skew("hot:19", 5)), std::vector<std::size_t>(20, 100));
    // The hot rank is the first of the seeded order.
    const auto counts = destination_counts(1000, 4, parse_skew("hot:1", 5));
    EXPECT_EQ(counts[static_cast<std::size_t>(popularity_order(4, 5)[0])], 900u);
}

// zipf:S: position p weighs 1/(p+1)^S. S 1 at n 4: 12, 6, 4, 3 out of 25.
TEST(Skew, ZipfFollowsItsLaw) {
    EXPECT_EQ(by_popularity(destination_counts(2500, 4, parse_skew("zipf:1", 2)), 2),
              (std::vector<std::size_t>{1200, 600, 400, 300}));
    // S 2 at n 3: 1, 1/4, 1/9 = 36, 9, 4 out of 49.
    EXPECT_EQ(by_popularity(destination_counts(4900, 3, parse_skew("zipf:2", 2)), 2),
              (std::vector<std::size_t>{3600, 900, 400}));
    // A steep law sends (almost) everything to the most popular rank.
    EXPECT_EQ(by_popularity(destination_counts(1000, 4, parse_skew("zipf:60", 2)), 2),
              (std::vector<std::size_t>{1000, 0, 0, 0}));
}

// What each rank sends and receives: the send side is balanced by construction (every rank
// routes the same count), the receive side carries the skew: n x its block.
TEST(Skew, AlltoallvTrafficPerRank) {
    const Collective& alltoallv = *find_collective("alltoallv");
    CollectiveParams params;
    params.skew = parse_skew("hot:1", 5);
    const auto traffic = alltoallv.rank_traffic(1000, 4, params);
    ASSERT_TRUE(traffic);
    EXPECT_EQ(traffic->sent, std::vector<std::size_t>(4, 1000));
    const auto hot = static_cast<std::size_t>(popularity_order(4, 5)[0]);
    EXPECT_EQ(traffic->received[hot], 3600u);
    EXPECT_EQ(total(traffic->received), 4000u);
    for (int rank = 0; rank < 4; ++rank)
        EXPECT_EQ(alltoallv.shape(1000, 4, rank, params).recv_count, traffic->received[static_cast<std::size_t>(rank)]);
    EXPECT_FALSE(find_collective("alltoall")->rank_traffic(1000, 4, params));
    EXPECT_TRUE(alltoallv.skewed());
    EXPECT_FALSE(alltoallv.supports_inplace());
}

}  // namespace
}  // namespace parbench

// MoE dispatch's routing and byte counts (bench/moe_dispatch.hpp), with figures worked out by hand:
// distinct experts per token, the skew's popularity, the capacity's drops in (rank, token, choice)
// order, and ep_bench's unique (token, host) and (source, token) counts beside the rows moved.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "bench/moe_dispatch.hpp"
#include "core/error.hpp"

namespace parbench {
namespace {

MoeDispatchConfig small_config() {
    MoeDispatchConfig c;
    c.tokens = 200;
    c.hidden = 4;
    c.topk = 3;
    c.experts = 8;
    return c;
}

TEST(MoeRouting, EveryTokenPicksDistinctExpertsTheSameOnEveryCall) {
    const MoeRouting routing = route_moe_tokens(small_config(), 4);
    EXPECT_EQ(routing.experts_per_rank, 2);
    for (int r = 0; r < 4; ++r)
        for (int t = 0; t < 200; ++t) {
            std::set<int> chosen;
            for (int i = 0; i < 3; ++i) {
                const int e = routing.at(r, t, i);
                ASSERT_GE(e, 0);
                ASSERT_LT(e, 8);
                chosen.insert(e);
            }
            EXPECT_EQ(chosen.size(), 3u);
        }
    EXPECT_EQ(route_moe_tokens(small_config(), 4).expert, routing.expert);  // any rank computes the same
    EXPECT_EQ(routing.rank_of_expert(5), 2);
}

TEST(MoeRouting, HotExpertsTakeMostFirstChoices) {
    MoeDispatchConfig c = small_config();
    c.topk = 1;
    c.skew = parse_skew("hot:2", 3);  // 2 experts take 90 % of the traffic
    const MoeRouting routing = route_moe_tokens(c, 4);
    std::vector<int> load(8, 0);
    for (int e : routing.expert) ++load[static_cast<std::size_t>(e)];
    std::vector<int> sorted = load;
    std::sort(sorted.rbegin(), sorted.rend());
    EXPECT_GT(sorted[0] + sorted[1], 0.8 * 800);  // 90 % expected of 800 draws
    EXPECT_EQ(routing.dropped, 0u);
}

TEST(MoeRouting, CapacityKeepsTheFirstSelectionsOfEachExpert) {
    MoeDispatchConfig c = small_config();
    c.skew = parse_skew("hot:1", 1);
    c.capacity = 1.0;  // ceil(1.0 x 4 x 200 x 3 / 8) = 300 per expert
    const MoeRouting routing = route_moe_tokens(c, 4);
    std::vector<std::size_t> kept(8, 0);
    for (int e : routing.expert)
        if (e >= 0) ++kept[static_cast<std::size_t>(e)];
    for (std::size_t k : kept) EXPECT_LE(k, 300u);
    EXPECT_GT(routing.dropped, 0u);  // one hot expert is chosen by nearly every token: 800 > 300
    EXPECT_EQ(routing.dropped + std::accumulate(kept.begin(), kept.end(), std::size_t{0}), 2400u);
    // The drops are the last ones in (rank, token, choice) order: rank 0's first token keeps its choices.
    for (int i = 0; i < 3; ++i) EXPECT_GE(routing.at(0, 0, i), 0);
}

TEST(MoeBytes, MovedRowsAndEpBenchsUniquePairs) {
    // 2 tokens on 4 ranks, 2 ranks per host (hosts a, a, b, b), 1 expert per rank, top-3.
    MoeRouting routing;
    routing.ranks = 4;
    routing.tokens = 2;
    routing.topk = 3;
    routing.experts_per_rank = 1;
    routing.expert.assign(4 * 2 * 3, -1);
    // Rank 0's token 0 -> experts 1, 2, 3 (ranks 1, 2, 3); token 1 -> experts 0, 2, 3.
    for (int i = 0; i < 3; ++i) routing.expert[static_cast<std::size_t>(i)] = i + 1;
    routing.expert[3] = 0;
    routing.expert[4] = 2;
    routing.expert[5] = 3;
    const std::vector<std::string> hosts{"a", "a", "b", "b"};
    const MoePhaseBytes b = moe_dispatch_bytes(routing, 0, hosts, 10);
    EXPECT_EQ(b.sent_intra, 20u);  // token 0 to rank 1, token 1 to rank 0 (itself)
    EXPECT_EQ(b.sent_inter, 40u);  // each token to ranks 2 and 3
    EXPECT_EQ(b.ep_sent, 40u);     // each token once per host: (0, a), (0, b), (1, a), (1, b)
    EXPECT_EQ(b.ep_sent_inter, 20u);
    EXPECT_EQ(b.received_intra, 10u);  // its own token 1; the other ranks route nothing
    EXPECT_EQ(b.ep_received, 10u);
    const MoePhaseBytes rank2 = moe_dispatch_bytes(routing, 2, hosts, 10);
    EXPECT_EQ(rank2.received_inter, 20u);  // both of rank 0's tokens
    EXPECT_EQ(rank2.ep_received_inter, 20u);
}

TEST(MoeConfig, RefusesWhatCannotRun) {
    MoeDispatchConfig c = small_config();
    EXPECT_NO_THROW(check_moe_config(c, 4));
    EXPECT_THROW(check_moe_config(c, 3), UsageError);  // 8 experts over 3 ranks
    c.topk = 9;
    EXPECT_THROW(check_moe_config(c, 4), UsageError);  // more than the experts
    c = small_config();
    c.dispatch_type = DType::int8;
    EXPECT_THROW(check_moe_config(c, 4), UsageError);
    c = small_config();
    c.capacity = 0.0;
    EXPECT_THROW(check_moe_config(c, 4), UsageError);
    c = small_config();
    c.skew = parse_skew("hot:9", 1);
    EXPECT_THROW(check_moe_config(c, 4), UsageError);  // 9 hot experts of 8
}

}  // namespace
}  // namespace parbench

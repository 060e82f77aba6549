// Context parallelism's pure parts: the positions each rank holds (and the refusals of
// sequences that do not divide), the style and balance names, the expected cp traffic
// formula (theory/context_traffic.hpp) on literal shapes, and what both attention styles share
// (every rank's chunks, their workspace's parts).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "tests/support/usage_error_text.hpp"
#include "theory/context_traffic.hpp"
#include "train/context/context_attention.hpp"
#include "train/context/context_attention_style.hpp"

namespace parbench {
namespace {

using testing::usage_error_text;

ContextSplit split(int rank, int size, ContextBalance balance) {
    return ContextSplit{rank, size, ContextStyle::ring, balance};
}

TEST(ContextPositions, NoneKeepsContiguousChunks) {
    EXPECT_EQ(context_positions(6, split(0, 3, ContextBalance::none)), (std::vector<int>{0, 1}));
    EXPECT_EQ(context_positions(6, split(2, 3, ContextBalance::none)), (std::vector<int>{4, 5}));
}

TEST(ContextPositions, ZigzagTakesOneChunkFromEachEnd) {
    // c = 2, T = 8: chunks of 2, rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2
    EXPECT_EQ(context_positions(8, split(0, 2, ContextBalance::zigzag)), (std::vector<int>{0, 1, 6, 7}));
    EXPECT_EQ(context_positions(8, split(1, 2, ContextBalance::zigzag)), (std::vector<int>{2, 3, 4, 5}));
    // c = 3, T = 6: rank 1 holds chunks 1 and 4
    EXPECT_EQ(context_positions(6, split(1, 3, ContextBalance::zigzag)), (std::vector<int>{1, 4}));
}

TEST(ContextPositions, EveryBalanceCoversTheSequenceOnce) {
    for (ContextBalance balance : {ContextBalance::none, ContextBalance::zigzag})
        for (int c : {1, 2, 3, 4}) {
            std::vector<int> seen;
            for (int r = 0; r < c; ++r) {
                const auto positions = context_positions(24, split(r, c, balance));
                EXPECT_EQ(positions.size(), 24u / c);
                seen.insert(seen.end(), positions.begin(), positions.end());
            }
            std::sort(seen.begin(), seen.end());
            std::vector<int> all(24);
            std::iota(all.begin(), all.end(), 0);
            EXPECT_EQ(seen, all) << context_balance_name(balance) << " cp " << c;
        }
}

TEST(ContextPositions, OneRankHoldsTheWholeSequenceInOrder) {
    EXPECT_EQ(context_positions(5, split(0, 1, ContextBalance::zigzag)), (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(ContextPositions, RefusesSequencesThatDoNotDivide) {
    const std::string none = usage_error_text([] { context_positions(10, split(0, 3, ContextBalance::none)); });
    EXPECT_NE(none.find("--cp 3"), std::string::npos) << none;
    EXPECT_NE(none.find("sequence length 10"), std::string::npos) << none;
    // 3 divides 15 but 2 x 3 does not: zigzag refuses what none accepts
    const std::string zigzag = usage_error_text([] { context_positions(15, split(1, 3, ContextBalance::zigzag)); });
    EXPECT_NE(zigzag.find("--cp-balance zigzag"), std::string::npos) << zigzag;
    EXPECT_NE(zigzag.find("2 x cp = 6"), std::string::npos) << zigzag;
    EXPECT_NE(zigzag.find("--cp-balance none"), std::string::npos) << zigzag;
    EXPECT_EQ(usage_error_text([] { context_positions(15, split(1, 3, ContextBalance::none)); }), "");
    EXPECT_NE(usage_error_text([] { context_positions(8, split(0, 0, ContextBalance::none)); }), "");
}

TEST(ContextChunks, EveryRankInRankOrder) {
    // c = 2, T = 8, zigzag: chunks of 2, rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2
    const auto chunks = detail::chunks_of_every_rank(8, split(1, 2, ContextBalance::zigzag));
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_EQ(chunks[0].index, (std::vector<int>{0, 3}));
    EXPECT_EQ(chunks[1].index, (std::vector<int>{1, 2}));
    EXPECT_EQ(chunks[0].length, 2);
    EXPECT_EQ(chunks[1].length, 2);
}

TEST(ContextWorkspace, PartsAreConsecutiveAndNoneRunsPastTheEnd) {
    std::vector<float> memory(8);
    const Buffer workspace(memory.data(), memory.size() * sizeof(float), nullptr);
    detail::WorkspaceParts parts(workspace);
    EXPECT_EQ(parts.take(3), memory.data());
    EXPECT_EQ(parts.take(5), memory.data() + 3);
    EXPECT_THROW(parts.take(1), std::logic_error);
}

TEST(ContextNames, StyleAndBalance) {
    EXPECT_EQ(context_style_name(ContextStyle::ring), "ring");
    EXPECT_EQ(context_style_name(ContextStyle::alltoall), "alltoall");
    EXPECT_EQ(context_balance_name(ContextBalance::zigzag), "zigzag");
    EXPECT_EQ(context_balance_name(ContextBalance::none), "none");
}

ContextAttentionShape shape(ContextStyle style, int cp, int heads, int kv_heads, int first_query_head = 0) {
    ContextAttentionShape s;
    s.batch = 2;
    s.seq_len = 24;
    s.heads = heads;
    s.kv_heads = kv_heads;
    s.head_size = 8;
    s.first_query_head = first_query_head;
    s.queries_per_kv = heads / kv_heads;
    s.cp = cp;
    s.style = style;
    return s;
}

TEST(ContextTraffic, RingSendsKvBlocksAroundAndGradientsHome) {
    // c = 4: a K or V block is 2 x 6 tokens x 2 kv heads x 8 x 4 bytes = 768 bytes
    const ContextLayerTraffic t = context_attention_traffic(shape(ContextStyle::ring, 4, 4, 2));
    EXPECT_EQ(t.forward.by_op.at("send").calls, 6.0);
    EXPECT_EQ(t.forward.by_op.at("send").bytes, 6.0 * 768);
    EXPECT_EQ(t.forward.by_op.at("recv").bytes, 6.0 * 768);
    EXPECT_EQ(t.forward.messages, 6.0);
    EXPECT_EQ(t.forward.bytes_sent, 6.0 * 768);
    EXPECT_EQ(t.backward.by_op.at("send").calls, 14.0);  // 2(c-1) K/V + 2c dK/dV
    EXPECT_EQ(t.backward.bytes_sent, 14.0 * 768);
    EXPECT_EQ(t.forward.by_op.size(), 2u);
}

TEST(ContextTraffic, AlltoallReshardsFourTensorsEachWay) {
    // c = 2, 4 query heads, 2 kv heads: q buffer 2 x 12 x 4 x 8 x 4 = 3072 bytes, k buffer
    // 2 x 12 x (2 ranks x 1 kv head) x 8 x 4 = 1536
    const ContextLayerTraffic t = context_attention_traffic(shape(ContextStyle::alltoall, 2, 4, 2));
    EXPECT_EQ(t.forward.by_op.at("alltoall").calls, 4.0);
    EXPECT_EQ(t.forward.by_op.at("alltoall").bytes, 2 * 3072.0 + 2 * 1536.0);
    EXPECT_EQ(t.forward.bytes_sent, (2 * 3072.0 + 2 * 1536.0) / 2);
    EXPECT_EQ(t.backward.messages, 4.0);
    EXPECT_EQ(t.forward.by_op.size(), 1u);
}

TEST(ContextTraffic, OneRankCarriesNothing) {
    for (ContextStyle style : {ContextStyle::ring, ContextStyle::alltoall}) {
        const ContextLayerTraffic t = context_attention_traffic(shape(style, 1, 4, 2));
        EXPECT_TRUE(t.forward.by_op.empty());
        EXPECT_EQ(t.backward.messages, 0.0);
    }
}

TEST(ContextTraffic, AlltoallKeyValueWindows) {
    // c divides NKV: the windows split the kv heads
    const ContextAttentionShape split_heads = shape(ContextStyle::alltoall, 2, 8, 4);
    EXPECT_EQ(alltoall_kv_window(split_heads, 0).first, 0);
    EXPECT_EQ(alltoall_kv_window(split_heads, 1).first, 2);
    EXPECT_EQ(alltoall_kv_window(split_heads, 1).count, 2);
    // 6 query heads over 2 kv heads on 3 ranks: rank 1's heads 2, 3 read kv heads 0 and 1, so
    // every rank receives a window of 2 (the last one shifted down to fit)
    const ContextAttentionShape spanning = shape(ContextStyle::alltoall, 3, 6, 2);
    for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(alltoall_kv_window(spanning, r).count, 2);
        EXPECT_EQ(alltoall_kv_window(spanning, r).first, 0);
    }
    // fewer kv heads than ranks: 8 query heads over 2 kv heads on 4 ranks, one kv head each
    const ContextAttentionShape fewer = shape(ContextStyle::alltoall, 4, 8, 2);
    EXPECT_EQ(alltoall_kv_window(fewer, 1).first, 0);
    EXPECT_EQ(alltoall_kv_window(fewer, 2).first, 1);
    EXPECT_EQ(alltoall_kv_window(fewer, 3).count, 1);
}

}  // namespace
}  // namespace parbench

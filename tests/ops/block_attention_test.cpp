// CpuOps' blockwise attention (ring attention's pieces): the block backward against central
// finite differences, and causal attention computed block by block with the online softmax
// (2, 3 and 4 key blocks) against gqa_attention_forward/backward on the whole sequence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "gradient_check.hpp"
#include "standard_attention_reference.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

// Blockwise and whole-sequence attention sum the same terms in a different order (partial
// sums rescaled by exp of the max difference), so they agree to float rounding of sums of a
// few dozen terms of magnitude ~1: outputs to 2e-6 absolute plus 1e-5 relative, gradients (sums
// over more terms) to 1e-5 plus 1e-4.
constexpr double out_absolute = 2e-6, out_relative = 1e-5;

// Causal attention over the whole sequence of `s`, its T tokens cut into `blocks` equal blocks:
// every query block against every key block not in its future, merged with the online softmax.
struct Blockwise {
    CpuOps& ops;
    GqaShape s;
    int blocks;

    int length() const { return s.T / blocks; }
    std::size_t rows() const { return static_cast<std::size_t>(s.B) * s.T * s.NH; }
    AttentionBlock block(int i, int j) const {
        return attention_block(s, i * length(), length(), j * length(), length(),
                               i == j ? BlockMask::causal : BlockMask::full);
    }

    void forward(std::vector<float>& out, std::vector<float>& lse, const std::vector<float>& q,
                 const std::vector<float>& k, const std::vector<float>& v) const {
        std::vector<float> part_out(out.size()), part_max(rows()), part_sum(rows()), scores(block(0, 0).tile_elements());
        std::vector<float> row_max(rows(), -std::numeric_limits<float>::infinity()), row_sum(rows(), 0.0f);
        std::fill(out.begin(), out.end(), 0.0f);
        lse.assign(rows(), 0.0f);
        for (int i = 0; i < blocks; ++i)
            for (int j = 0; j <= i; ++j) {
                ops.block_attention_forward(part_out.data(), part_max.data(), part_sum.data(), scores.data(),
                                            q.data(), k.data(), v.data(), block(i, j));
                ops.block_attention_merge(out.data(), row_max.data(), row_sum.data(), part_out.data(),
                                          part_max.data(), part_sum.data(), block(i, j));
            }
        ops.block_attention_finish(out.data(), lse.data(), row_max.data(), row_sum.data(), rows(), s.hs);
    }

    void backward(std::vector<float>& dq, std::vector<float>& dk, std::vector<float>& dv,
                  const std::vector<float>& dout, const std::vector<float>& out, const std::vector<float>& lse,
                  const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v) const {
        std::vector<float> delta(rows()), scratch(2 * block(0, 0).tile_elements());
        ops.block_attention_delta(delta.data(), dout.data(), out.data(), rows(), s.hs);
        for (int i = 0; i < blocks; ++i)
            for (int j = 0; j <= i; ++j)
                ops.block_attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), q.data(),
                                             k.data(), v.data(), lse.data(), delta.data(), block(i, j));
    }
};

struct Case {
    const char* name;
    GqaShape shape;
};

// T = 12 cuts into 2, 3 and 4 blocks. Multi-head (NKV = NH), grouped (4 query heads over 2
// key/value heads) and a tensor-parallel rank with replicated key/value heads (its one query
// head, global head 3, reads key/value head 1 of 2).
const Case cases[] = {{"multi-head", GqaShape{2, 12, 3, 3, 4, 0, 1}},
                      {"grouped", GqaShape{2, 12, 4, 2, 4, 0, 2}},
                      {"replicated kv", GqaShape{1, 12, 1, 2, 4, 3, 2}}};

TEST(CpuOps, BlockwiseCausalAttentionEqualsWholeSequence) {
    CpuOps ops;
    for (const Case& c : cases)
        for (int blocks : {2, 3, 4}) {
            SCOPED_TRACE(::testing::Message() << c.name << ", " << blocks << " blocks");
            const GqaShape& s = c.shape;
            const StandardAttention expected = standard_attention(ops, s, 80);
            const auto& [q, k, v, dout] = std::tie(expected.q, expected.k, expected.v, expected.dout);

            const Blockwise blockwise{ops, s, blocks};
            std::vector<float> out(s.q_elements()), lse;
            blockwise.forward(out, lse, q, k, v);
            EXPECT_TRUE(all_close(out, expected.out, out_absolute, out_relative));
            // lse against its definition, log sum_j exp(s_j) over the visible scores
            for (std::size_t b = 0; b < static_cast<std::size_t>(s.B); ++b)
                for (std::size_t h = 0; h < static_cast<std::size_t>(s.NH); ++h)
                    for (std::size_t t = 0; t < static_cast<std::size_t>(s.T); ++t) {
                        double sum = 0.0;
                        for (std::size_t t2 = 0; t2 <= t; ++t2) sum += std::exp(expected.preatt[s.score_row(b, h, t) + t2]);
                        EXPECT_NEAR(lse[(b * s.T + t) * s.NH + h], std::log(sum), 1e-5);
                    }
            auto dq = prefilled(s.q_elements()), dk = prefilled(s.kv_elements()), dv = prefilled(s.kv_elements());
            blockwise.backward(dq, dk, dv, dout, out, lse, q, k, v);
            EXPECT_TRUE(all_close(dq, expected.dq, 1e-5, 1e-4));
            EXPECT_TRUE(all_close(dk, expected.dk, 1e-5, 1e-4));
            EXPECT_TRUE(all_close(dv, expected.dv, 1e-5, 1e-4));
        }
}

// A block longer than the kernels' 32-row query sub-blocks (80 rows: 32, 32 and 16, the last
// short), the whole sequence in one block (the FlashAttention-style use) or in two, against the
// standard attention on the whole sequence.
TEST(CpuOps, LongBlocksInQuerySubBlocksEqualTheStandardAttention) {
    CpuOps ops;
    const GqaShape s{2, 80, 4, 2, 8, 0, 2};
    const StandardAttention expected = standard_attention(ops, s, 90);
    const auto& [q, k, v, dout] = std::tie(expected.q, expected.k, expected.v, expected.dout);
    for (int blocks : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << blocks << " blocks");
        const Blockwise blockwise{ops, s, blocks};
        std::vector<float> out(s.q_elements()), lse;
        blockwise.forward(out, lse, q, k, v);
        EXPECT_TRUE(all_close(out, expected.out, out_absolute, out_relative));
        auto dq = prefilled(s.q_elements()), dk = prefilled(s.kv_elements()), dv = prefilled(s.kv_elements());
        blockwise.backward(dq, dk, dv, dout, out, lse, q, k, v);
        EXPECT_TRUE(all_close(dq, expected.dq, 1e-5, 1e-4));
        EXPECT_TRUE(all_close(dk, expected.dk, 1e-5, 1e-4));
        EXPECT_TRUE(all_close(dv, expected.dv, 1e-5, 1e-4));
    }
}

// The gradient of the blockwise composition (3 blocks, causal, grouped heads) is d(loss) of
// the blockwise forward itself, block backward summed over the pairs.
TEST(CpuOps, BlockwiseBackwardMatchesFiniteDifferences) {
    CpuOps ops;
    const GqaShape s{1, 6, 4, 2, 3, 0, 2};
    const Blockwise blockwise{ops, s, 3};
    auto q = random_vector(s.q_elements(), 84), k = random_vector(s.kv_elements(), 85),
         v = random_vector(s.kv_elements(), 86);
    const auto dout = random_vector(s.q_elements(), 87);
    std::vector<float> out(s.q_elements()), lse;
    blockwise.forward(out, lse, q, k, v);
    auto dq = prefilled(s.q_elements()), dk = prefilled(s.kv_elements()), dv = prefilled(s.kv_elements());
    blockwise.backward(dq, dk, dv, dout, out, lse, q, k, v);
    const auto loss = [&] {
        std::vector<float> y(s.q_elements()), l;
        blockwise.forward(y, l, q, k, v);
        return weighted_sum(y, dout);
    };
    EXPECT_TRUE(matches_finite_differences(q, minus_prefill(dq), loss));
    EXPECT_TRUE(matches_finite_differences(k, minus_prefill(dk), loss));
    EXPECT_TRUE(matches_finite_differences(v, minus_prefill(dv), loss));
}

// One full block on its own (its softmax normalised by finish): 3 queries at tokens 1..3 of a
// 5-token q tensor against 4 keys at tokens 2..5 of a 7-token k/v tensor, so the token windows
// and the unequal shapes are exercised. Rows and keys outside the windows get no gradient.
TEST(CpuOps, FullBlockBackwardMatchesFiniteDifferences) {
    CpuOps ops;
    AttentionBlock a;
    a.B = 2;
    a.NH = 2;
    a.NKV = 1;
    a.hs = 3;
    a.queries_per_kv = 2;
    a.q_tokens = 5;
    a.q_begin = 1;
    a.rows = 3;
    a.kv_tokens = 7;
    a.kv_begin = 2;
    a.cols = 4;
    a.mask = BlockMask::full;
    const std::size_t q_size = static_cast<std::size_t>(a.B) * a.q_tokens * a.NH * a.hs;
    const std::size_t kv_size = static_cast<std::size_t>(a.B) * a.kv_tokens * a.NKV * a.hs;
    const std::size_t rows = static_cast<std::size_t>(a.B) * a.q_tokens * a.NH;
    auto q = random_vector(q_size, 88), k = random_vector(kv_size, 89), v = random_vector(kv_size, 90);
    const auto dout = random_vector(q_size, 91);
    std::vector<float> scores(a.tile_elements()), scratch(2 * a.tile_elements());
    // forward: one block, normalised; rows outside the block keep out = 0 (max -inf, sum 1)
    const auto forward = [&](std::vector<float>& out, std::vector<float>& lse) {
        std::vector<float> part_max(rows, -std::numeric_limits<float>::infinity()), part_sum(rows, 1.0f);
        out.assign(q_size, 0.0f);
        lse.assign(rows, 0.0f);
        ops.block_attention_forward(out.data(), part_max.data(), part_sum.data(), scores.data(), q.data(), k.data(),
                                    v.data(), a);
        ops.block_attention_finish(out.data(), lse.data(), part_max.data(), part_sum.data(), rows, a.hs);
    };
    std::vector<float> out, lse, delta(rows);
    forward(out, lse);
    auto dq = prefilled(q_size), dk = prefilled(kv_size), dv = prefilled(kv_size);
    ops.block_attention_delta(delta.data(), dout.data(), out.data(), rows, a.hs);
    ops.block_attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), q.data(), k.data(),
                                 v.data(), lse.data(), delta.data(), a);
    const auto loss = [&] {
        std::vector<float> y, l;
        forward(y, l);
        return weighted_sum(y, dout);
    };
    EXPECT_TRUE(matches_finite_differences(q, minus_prefill(dq), loss));
    EXPECT_TRUE(matches_finite_differences(k, minus_prefill(dk), loss));
    EXPECT_TRUE(matches_finite_differences(v, minus_prefill(dv), loss));
    EXPECT_EQ(a.visible_scores(), 2u * 2 * 3 * 4);
}

TEST(CpuOps, MergingIntoAnEmptyRowTakesThePartial) {
    const OnlineSoftmaxMerge m = online_softmax_merge(-std::numeric_limits<float>::infinity(), 0.0f, 2.5f, 3.0f);
    EXPECT_EQ(m.row_max, 2.5f);
    EXPECT_EQ(m.row_sum, 3.0f);
    EXPECT_EQ(m.running_factor, 0.0f);
    EXPECT_EQ(m.partial_factor, 1.0f);
    // two halves of exp(1), exp(3): max 3, sum exp(-2) + 1 either way round
    const OnlineSoftmaxMerge both = online_softmax_merge(1.0f, 1.0f, 3.0f, 1.0f);
    EXPECT_FLOAT_EQ(both.row_sum, std::exp(-2.0f) + 1.0f);
    EXPECT_FLOAT_EQ(log_sum_exp(both.row_max, both.row_sum), std::log(std::exp(1.0f) + std::exp(3.0f)));
}

TEST(CpuOps, CopyAndAddRowsFollowTheirPitches) {
    CpuOps ops;
    const std::vector<float> src = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // 3 rows of pitch 3
    std::vector<float> dst(8, 10.0f);                           // 2 rows of pitch 4
    ops.copy_rows(dst.data() + 1, 4, src.data() + 1, 3, 2, 2);
    EXPECT_EQ(dst, (std::vector<float>{10, 2, 3, 10, 10, 5, 6, 10}));
    ops.add_rows(dst.data(), 4, src.data(), 3, 1, 2);
    EXPECT_EQ(dst, (std::vector<float>{11, 2, 3, 10, 14, 5, 6, 10}));
}

}  // namespace
}  // namespace parbench

// SequenceAttention (train/ops/sequence_attention.hpp), the block kernels over a whole causal
// sequence as GPT and Llama run them: against the standard attention on the same inputs, in
// Llama's layout (q, k, v apart, grouped heads) and in GPT's fused qkv rows read in place at
// pitch 3C, and its workspace as theory/engine_attention.hpp counts it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "gradient_check.hpp"
#include "standard_attention_reference.hpp"
#include "theory/engine_attention.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/sequence_attention.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

// The block kernels sum a row's terms in another order than the standard softmax (and over
// 32-row tiles): float rounding of sums of up to 70 terms of magnitude ~1 (all_close's bounds
// below).

// 70 tokens: query sub-blocks of 32, 32 and 6 rows.
TEST(SequenceAttention, GroupedHeadsEqualTheStandardAttention) {
    CpuOps ops;
    const GqaShape s{2, 70, 4, 2, 8, 0, 2};
    const StandardAttention expected = standard_attention(ops, s, 30);
    const auto& [q, k, v, dout] = std::tie(expected.q, expected.k, expected.v, expected.dout);

    const SequenceAttention attention(s, static_cast<int>(s.q_width()), static_cast<int>(s.kv_width()));
    EXPECT_EQ(attention.saved_floats(), static_cast<std::size_t>(s.B) * s.T * s.NH);
    std::vector<float> out(s.q_elements()), lse(attention.saved_floats()), workspace(attention.workspace_floats(ops));
    attention.forward(ops, out.data(), lse.data(), workspace.data(), q.data(), k.data(), v.data());
    EXPECT_TRUE(all_close(out, expected.out, 2e-6, 1e-5));
    auto dq = prefilled(s.q_elements()), dk = prefilled(s.kv_elements()), dv = prefilled(s.kv_elements());
    attention.backward(ops, dq.data(), dk.data(), dv.data(), workspace.data(), dout.data(), out.data(), lse.data(),
                       q.data(), k.data(), v.data());
    EXPECT_TRUE(all_close(dq, expected.dq, 1e-5, 1e-4));
    EXPECT_TRUE(all_close(dk, expected.dk, 1e-5, 1e-4));
    EXPECT_TRUE(all_close(dv, expected.dv, 1e-5, 1e-4));
}

// GPT's layout: each token's row of qkv is [q (C) | k (C) | v (C)], read in place at pitch 3C;
// the gradient lands at the same places of dqkv, and nothing else of dqkv is touched.
TEST(SequenceAttention, FusedQkvRowsAreReadInPlace) {
    CpuOps ops;
    const int B = 2, T = 40, NH = 3, hs = 4, C = NH * hs;
    const std::size_t qkv_elements = static_cast<std::size_t>(B) * T * 3 * C, out_elements = qkv_elements / 3;
    const std::size_t scores = static_cast<std::size_t>(B) * NH * T * T;
    const auto qkv = random_vector(qkv_elements, 40), dout = random_vector(out_elements, 41);
    std::vector<float> expected(out_elements), preatt(scores), att(scores), dpreatt(scores), datt(scores);
    ops.attention_forward(expected.data(), preatt.data(), att.data(), qkv.data(), B, T, C, NH);
    auto expected_dqkv = prefilled(qkv_elements);
    ops.attention_backward(expected_dqkv.data(), dpreatt.data(), datt.data(), dout.data(), qkv.data(), att.data(), B,
                           T, C, NH);

    const SequenceAttention attention(GqaShape{B, T, NH, NH, hs, 0, 1}, 3 * C, 3 * C);
    std::vector<float> out(out_elements), lse(attention.saved_floats()), workspace(attention.workspace_floats(ops));
    attention.forward(ops, out.data(), lse.data(), workspace.data(), qkv.data(), qkv.data() + C, qkv.data() + 2 * C);
    EXPECT_TRUE(all_close(out, expected, 2e-6, 1e-5));
    auto dqkv = prefilled(qkv_elements);
    attention.backward(ops, dqkv.data(), dqkv.data() + C, dqkv.data() + 2 * C, workspace.data(), dout.data(),
                       out.data(), lse.data(), qkv.data(), qkv.data() + C, qkv.data() + 2 * C);
    EXPECT_TRUE(all_close(dqkv, expected_dqkv, 1e-5, 1e-4));
}

// What the model allocates is what the theory counts (theory/memory.cpp's items): the CPU's
// scratch is two 32-row tiles, not the T x T scores, so it grows with T, not T².
TEST(SequenceAttention, WorkspaceIsWhatTheTheoryCounts) {
    CpuOps ops;
    for (const GqaShape& s : {GqaShape{2, 256, 8, 4, 32, 0, 2}, GqaShape{1, 20, 2, 2, 4, 0, 1}}) {
        const SequenceAttention attention(s, static_cast<int>(s.q_width()), static_cast<int>(s.kv_width()));
        const SequenceAttentionFloats theory = sequence_attention_floats(s);
        EXPECT_EQ(attention.saved_floats(), theory.saved);
        EXPECT_EQ(attention.workspace_floats(ops), theory.workspace);
        const std::size_t rows = static_cast<std::size_t>(s.B) * s.T * s.NH;
        const std::size_t tile_rows = static_cast<std::size_t>(std::min(s.T, block_query_rows));
        EXPECT_EQ(theory.workspace, 2 * rows + 2 * tile_rows * static_cast<std::size_t>(s.T));
    }
}

}  // namespace
}  // namespace parbench

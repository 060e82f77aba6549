// CpuOps' Llama ops: RMSNorm, SwiGLU, rotary embedding and grouped-query attention, forward
// against their definitions and every backward against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "gradient_check.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

TEST(CpuOps, RmsnormForwardGivesUnitRootMeanSquare) {
    CpuOps ops;
    const int N = 3, C = 10;
    const auto inp = random_vector(N * C, 40, -3.0f, 2.0f);
    const std::vector<float> ones(C, 1.0f);
    std::vector<float> out(N * C), rstd(N);
    ops.rmsnorm_forward(out.data(), rstd.data(), inp.data(), ones.data(), N, C, 1e-5f);
    for (int n = 0; n < N; ++n) {
        double squares = 0.0, input_squares = 0.0;
        for (int c = 0; c < C; ++c) {
            squares += out[n * C + c] * out[n * C + c];
            input_squares += inp[n * C + c] * inp[n * C + c];
        }
        EXPECT_NEAR(squares / C, 1.0, 1e-4);
        EXPECT_NEAR(rstd[n], 1.0 / std::sqrt(input_squares / C + 1e-5), 1e-5);
    }
}

TEST(CpuOps, RmsnormBackwardMatchesFiniteDifferences) {
    CpuOps ops;
    const int N = 4, C = 7;
    auto inp = random_vector(N * C, 41, -2.0f, 2.0f);
    auto weight = random_vector(C, 42, 0.5f, 1.5f);
    const auto dout = random_vector(N * C, 43);
    std::vector<float> out(N * C), rstd(N), scratch_rstd(N);
    ops.rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), N, C, 1e-5f);
    auto dinp = prefilled(N * C), dweight = prefilled(C);
    ops.rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), rstd.data(), N, C);
    const auto loss = [&] {
        ops.rmsnorm_forward(out.data(), scratch_rstd.data(), inp.data(), weight.data(), N, C, 1e-5f);
        return weighted_sum(out, dout);
    };
    EXPECT_TRUE(matches_finite_differences(inp, minus_prefill(dinp), loss));
    EXPECT_TRUE(matches_finite_differences(weight, minus_prefill(dweight), loss));
}

TEST(CpuOps, SwigluForwardAndBackward) {
    CpuOps ops;
    const std::size_t n = 40;
    auto gate = random_vector(n, 44, -4.0f, 4.0f), up = random_vector(n, 45, -2.0f, 2.0f);
    const auto dout = random_vector(n, 46);
    std::vector<float> out(n);
    ops.swiglu_forward(out.data(), gate.data(), up.data(), n);
    for (std::size_t i = 0; i < n; ++i)
        EXPECT_NEAR(out[i], gate[i] / (1.0 + std::exp(-static_cast<double>(gate[i]))) * up[i], 1e-5);
    auto dgate = prefilled(n), dup = prefilled(n);
    ops.swiglu_backward(dgate.data(), dup.data(), dout.data(), gate.data(), up.data(), n);
    const auto loss = [&] {
        ops.swiglu_forward(out.data(), gate.data(), up.data(), n);
        return weighted_sum(out, dout);
    };
    EXPECT_TRUE(matches_finite_differences(gate, minus_prefill(dgate), loss));
    EXPECT_TRUE(matches_finite_differences(up, minus_prefill(dup), loss));
}

// q·k after rotation depends on the positions' difference only (RoFormer sec. 3.4.2), and a
// rotation keeps every pair's length.
TEST(CpuOps, RopeScoresDependOnRelativePosition) {
    CpuOps ops;
    const int hs = 8;
    const auto q = random_vector(hs, 47), k = random_vector(hs, 48);
    auto rotated_dot = [&](int query_position, int key_position) {
        std::vector<float> qr = q, kr = k;
        ops.rope_forward(qr.data(), &query_position, 1, 1, 1, hs, 10000.0f);
        ops.rope_forward(kr.data(), &key_position, 1, 1, 1, hs, 10000.0f);
        double norm_q = 0.0, norm_before = 0.0;
        for (int i = 0; i < hs; ++i) {
            norm_q += qr[i] * qr[i];
            norm_before += q[i] * q[i];
        }
        EXPECT_NEAR(norm_q, norm_before, 1e-5);
        return std::inner_product(qr.begin(), qr.end(), kr.begin(), 0.0);
    };
    EXPECT_NEAR(rotated_dot(5, 2), rotated_dot(13, 10), 1e-4);
    EXPECT_NEAR(rotated_dot(0, 0), std::inner_product(q.begin(), q.end(), k.begin(), 0.0), 1e-6);
    EXPECT_GT(std::abs(rotated_dot(5, 2) - rotated_dot(5, 4)), 1e-3);
}

TEST(CpuOps, RopeBackwardMatchesFiniteDifferences) {
    CpuOps ops;
    const int B = 2, T = 3, H = 2, hs = 6;
    const std::vector<int> positions{0, 7, 3};  // any positions: a rank's own under CP
    const std::size_t n = static_cast<std::size_t>(B) * T * H * hs;
    auto x = random_vector(n, 49);
    const auto dout = random_vector(n, 50);
    std::vector<float> out(n);
    auto dx = dout;  // backward turns the gradient in place
    ops.rope_backward(dx.data(), positions.data(), B, T, H, hs, 500000.0f);
    const auto loss = [&] {
        out = x;
        ops.rope_forward(out.data(), positions.data(), B, T, H, hs, 500000.0f);
        return weighted_sum(out, dout);
    };
    EXPECT_TRUE(matches_finite_differences(x, dx, loss));
}

// With as many key/value heads as query heads, GQA is the multi-head attention op.
TEST(CpuOps, GqaWithEqualHeadsIsMultiHeadAttention) {
    CpuOps ops;
    const int B = 2, T = 5, NH = 3, hs = 4, C = NH * hs;
    const auto qkv = random_vector(static_cast<std::size_t>(B) * T * 3 * C, 51);
    std::vector<float> q(B * T * C), k(B * T * C), v(B * T * C);
    for (int r = 0; r < B * T; ++r)
        for (int c = 0; c < C; ++c) {
            q[r * C + c] = qkv[r * 3 * C + c];
            k[r * C + c] = qkv[r * 3 * C + C + c];
            v[r * C + c] = qkv[r * 3 * C + 2 * C + c];
        }
    const GqaShape shape{B, T, NH, NH, hs, 0, 1};
    std::vector<float> out(B * T * C), expected(B * T * C), preatt(shape.score_elements()), att(preatt.size());
    ops.gqa_attention_forward(out.data(), preatt.data(), att.data(), q.data(), k.data(), v.data(), shape);
    ops.attention_forward(expected.data(), preatt.data(), att.data(), qkv.data(), B, T, C, NH);
    for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-6) << i;
}

struct GqaCase {
    GqaShape shape;
    std::uint32_t seed;
};

void check_gqa_backward(const GqaCase& c) {
    CpuOps ops;
    const GqaShape& s = c.shape;
    auto q = random_vector(s.q_elements(), c.seed), k = random_vector(s.kv_elements(), c.seed + 1),
         v = random_vector(s.kv_elements(), c.seed + 2);
    const auto dout = random_vector(s.q_elements(), c.seed + 3);
    std::vector<float> out(s.q_elements()), preatt(s.score_elements()), att(s.score_elements());
    ops.gqa_attention_forward(out.data(), preatt.data(), att.data(), q.data(), k.data(), v.data(), s);
    std::vector<float> dpreatt(s.score_elements(), 7.0f), datt(s.score_elements(), 7.0f);
    auto dq = prefilled(s.q_elements()), dk = prefilled(s.kv_elements()), dv = prefilled(s.kv_elements());
    ops.gqa_attention_backward(dq.data(), dk.data(), dv.data(), dpreatt.data(), datt.data(), dout.data(), q.data(),
                               k.data(), v.data(), att.data(), s);
    const auto loss = [&] {
        ops.gqa_attention_forward(out.data(), preatt.data(), att.data(), q.data(), k.data(), v.data(), s);
        return weighted_sum(out, dout);
    };
    EXPECT_TRUE(matches_finite_differences(q, minus_prefill(dq), loss));
    EXPECT_TRUE(matches_finite_differences(k, minus_prefill(dk), loss));
    EXPECT_TRUE(matches_finite_differences(v, minus_prefill(dv), loss));
}

TEST(CpuOps, GqaBackwardMatchesFiniteDifferences) {
    // 4 query heads over 2 key/value heads.
    check_gqa_backward({GqaShape{2, 4, 4, 2, 4, 0, 2}, 52});
}

// A tensor-parallel rank whose key/value heads are replicated: its 1 query head (global head
// 3 of 4) reads head 1 of the 2 it holds; head 0 gets no gradient.
TEST(CpuOps, GqaBackwardWithReplicatedKeyValueHeads) {
    const GqaShape shape{1, 5, 1, 2, 4, 3, 2};
    EXPECT_EQ(shape.kv_head(0), 1);
    check_gqa_backward({shape, 56});
}

}  // namespace
}  // namespace parbench

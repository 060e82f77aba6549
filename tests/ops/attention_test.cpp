// CpuOps' causal attention against a direct double-precision softmax, the causal mask, and
// the backward against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gradient_check.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

struct AttentionShape {
    int B, T, C, NH;
    std::size_t qkv() const { return static_cast<std::size_t>(B) * T * 3 * C; }
    std::size_t out() const { return static_cast<std::size_t>(B) * T * C; }
    std::size_t scores() const { return static_cast<std::size_t>(B) * NH * T * T; }
};

TEST(CpuOps, AttentionForwardMatchesDirectSoftmax) {
    CpuOps ops;
    const AttentionShape s{2, 5, 6, 3};  // head size 2
    const auto qkv = random_vector(s.qkv(), 30, -2.0f, 2.0f);
    std::vector<float> out(s.out()), preatt(s.scores(), 9.0f), att(s.scores(), 9.0f);
    ops.attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    const int hs = s.C / s.NH;
    const auto at = [&](int b, int t, int part, int h, int i) {
        return static_cast<double>(qkv[(static_cast<std::size_t>(b) * s.T + t) * 3 * s.C + part * s.C + h * hs + i]);
    };
    for (int b = 0; b < s.B; ++b)
        for (int h = 0; h < s.NH; ++h)
            for (int t = 0; t < s.T; ++t) {
                std::vector<double> score(s.T, -std::numeric_limits<double>::infinity());
                double max = score[0];
                for (int t2 = 0; t2 <= t; ++t2) {
                    double dot = 0.0;
                    for (int i = 0; i < hs; ++i) dot += at(b, t, 0, h, i) * at(b, t2, 1, h, i);
                    score[t2] = dot / std::sqrt(static_cast<double>(hs));
                    max = std::max(max, score[t2]);
                }
                double sum = 0.0;
                for (int t2 = 0; t2 < s.T; ++t2) sum += std::exp(score[t2] - max);  // exp(-inf) = 0: masked
                const std::size_t row = ((static_cast<std::size_t>(b) * s.NH + h) * s.T + t) * s.T;
                for (int t2 = 0; t2 < s.T; ++t2) {
                    const double p = std::exp(score[t2] - max) / sum;
                    EXPECT_NEAR(att[row + t2], p, 1e-6);
                    EXPECT_NEAR(preatt[row + t2], t2 <= t ? score[t2] : 0.0, 1e-5);
                }
                for (int i = 0; i < hs; ++i) {
                    double y = 0.0;
                    for (int t2 = 0; t2 <= t; ++t2) y += std::exp(score[t2] - max) / sum * at(b, t2, 2, h, i);
                    EXPECT_NEAR(out[(static_cast<std::size_t>(b) * s.T + t) * s.C + h * hs + i], y, 1e-5);
                }
            }
}

TEST(CpuOps, AttentionDoesNotLookAhead) {
    CpuOps ops;
    const AttentionShape s{1, 6, 8, 2};
    auto qkv = random_vector(s.qkv(), 31);
    std::vector<float> out(s.out()), changed(s.out()), preatt(s.scores()), att(s.scores());
    ops.attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    // change q, k and v of the last position only
    for (int i = 0; i < 3 * s.C; ++i) qkv[(s.T - 1) * 3 * s.C + i] += 1.0f;
    ops.attention_forward(changed.data(), preatt.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    for (int i = 0; i < (s.T - 1) * s.C; ++i) EXPECT_EQ(out[i], changed[i]) << "element " << i;
    bool last_changed = false;
    for (int i = (s.T - 1) * s.C; i < s.T * s.C; ++i) last_changed |= out[i] != changed[i];
    EXPECT_TRUE(last_changed);
}

TEST(CpuOps, AttentionBackwardMatchesFiniteDifferences) {
    CpuOps ops;
    const AttentionShape s{2, 4, 8, 2};
    auto qkv = random_vector(s.qkv(), 32);
    const auto dout = random_vector(s.out(), 33);
    std::vector<float> out(s.out()), preatt(s.scores()), att(s.scores());
    ops.attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    // scratch filled with garbage: backward must overwrite it, not add to it
    std::vector<float> dpreatt(s.scores(), 7.0f), datt(s.scores(), 7.0f);
    auto dqkv = prefilled(s.qkv());
    ops.attention_backward(dqkv.data(), dpreatt.data(), datt.data(), dout.data(), qkv.data(), att.data(), s.B, s.T,
                           s.C, s.NH);
    const auto loss = [&] {
        ops.attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
        return weighted_sum(out, dout);
    };
    EXPECT_TRUE(matches_finite_differences(qkv, minus_prefill(dqkv), loss));
}

}  // namespace
}  // namespace parbench

// The shared per-element formulas of kernels/*_math.hpp, which both CPU ops and CUDA kernels use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/adamw_math.hpp"
#include "kernels/fast_exp_math.hpp"
#include "kernels/gelu_math.hpp"
#include "kernels/layernorm_math.hpp"
#include "kernels/mse_math.hpp"
#include "kernels/softmax_math.hpp"

namespace parbench {
namespace {

// Distance in units in the last place between a float and the correctly rounded float of a
// double (both finite, same sign).
std::int64_t ulps_apart(float value, double exact) {
    const float rounded = static_cast<float>(exact);
    std::int32_t a, b;
    std::memcpy(&a, &value, sizeof a);
    std::memcpy(&b, &rounded, sizeof b);
    return std::abs(static_cast<std::int64_t>(a) - static_cast<std::int64_t>(b));
}

TEST(OpsMath, FastExpWithinTwoUlpsOverItsRange) {
    // Every 997th float of [-87.3, 88] (about 2 million, both signs, every binade met), and
    // the ends: fast_exp replaces expf in softmax, cross-entropy, GELU and SiLU.
    std::int64_t worst = 0;
    float worst_at = 0.0f;
    auto check = [&](float x) {
        const std::int64_t ulps = ulps_apart(fast_exp(x), std::exp(static_cast<double>(x)));
        if (ulps > worst) {
            worst = ulps;
            worst_at = x;
        }
    };
    for (float x = -87.3f; x < 88.0f; x = std::nextafter(x, 100.0f)) {
        check(x);
        for (int skip = 0; skip < 996 && x < 88.0f; ++skip) x = std::nextafter(x, 100.0f);
    }
    for (float x : {-87.3f, -10.0f, -1.0f, -1e-3f, -1e-30f, 0.0f, 1e-30f, 1e-3f, 0.5f, 1.0f, 10.0f, 88.0f}) check(x);
    EXPECT_LE(worst, 2) << "worst at x = " << worst_at;
    EXPECT_EQ(fast_exp(0.0f), 1.0f);
}

TEST(OpsMath, FastExpEdges) {
    EXPECT_EQ(fast_exp(-100.0f), 0.0f);  // below the normal range: 0, as a masked softmax term needs
    EXPECT_EQ(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
    EXPECT_TRUE(std::isfinite(fast_exp(1000.0f)));  // saturates instead of overflowing
    EXPECT_FLOAT_EQ(fast_exp(1000.0f), fast_exp(88.0f));
    EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(OpsMath, GeluKnownValues) {
    EXPECT_EQ(gelu(0.0f), 0.0f);
    // 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)), computed in double
    EXPECT_NEAR(gelu(1.0f), 0.8411919906, 1e-6);
    EXPECT_NEAR(gelu(-1.0f), -0.1588080094, 1e-6);
    EXPECT_NEAR(gelu(6.0f), 6.0f, 1e-5);  // identity far right, zero far left
    EXPECT_NEAR(gelu(-6.0f), 0.0f, 1e-5);
    // against the tanh form in double over [-10, 10]: relative 1e-6, absolute 1e-7 near 0
    for (double step = -10.0; step <= 10.0; step += 0.01) {
        const double x = static_cast<float>(step);
        const double exact = 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        EXPECT_NEAR(gelu(static_cast<float>(x)), exact, 1e-6 * std::abs(exact) + 1e-7) << "at x = " << x;
    }
}

TEST(OpsMath, GeluDerivativeIsTheDerivativeOfGelu) {
    for (double x = -4.0; x <= 4.0; x += 0.25) {
        const double h = 1e-3;
        const double numeric = (gelu(static_cast<float>(x + h)) - gelu(static_cast<float>(x - h))) / (2 * h);
        EXPECT_NEAR(gelu_derivative(static_cast<float>(x)), numeric, 2e-4) << "at x = " << x;
    }
    EXPECT_NEAR(gelu_derivative(0.0f), 0.5f, 1e-7);
}

TEST(OpsMath, LayernormPieces) {
    EXPECT_NEAR(layernorm_rstd(4.0f), 1.0 / std::sqrt(4.0 + 1e-5), 1e-7);
    EXPECT_FLOAT_EQ(layernorm_normalize(3.0f, 1.0f, 0.5f), 1.0f);
    // g = mean(g) and no correlation with xhat: nothing left to pass on
    EXPECT_FLOAT_EQ(layernorm_input_gradient(2.0f, 0.7f, 2.0f, 0.0f, 3.0f), 0.0f);
    EXPECT_FLOAT_EQ(layernorm_input_gradient(1.0f, 0.5f, 0.25f, 0.5f, 2.0f), 2.0f * (1.0f - 0.25f - 0.25f));
}

TEST(OpsMath, SoftmaxAndCrossentropyPieces) {
    EXPECT_FLOAT_EQ(attention_scale(64), 0.125f);
    EXPECT_FLOAT_EQ(softmax_term(2.0f, 2.0f), 1.0f);
    EXPECT_FLOAT_EQ(softmax_input_gradient(0.25f, 1.0f, 0.5f), 0.125f);
    // two logits {0, log 3}: p = {1/4, 3/4}; loss of target 0 = log 4
    const float max = std::log(3.0f);
    const float sum = softmax_term(0.0f, max) + softmax_term(max, max);
    EXPECT_NEAR(crossentropy_loss(max, sum, 0.0f), std::log(4.0f), 1e-6);
    EXPECT_FLOAT_EQ(crossentropy_logit_gradient(0.25f, true, 2.0f), -1.5f);
    EXPECT_FLOAT_EQ(crossentropy_logit_gradient(0.75f, false, 2.0f), 1.5f);
}

TEST(OpsMath, MsePieces) {
    EXPECT_FLOAT_EQ(squared_error(3.0f, 1.0f), 4.0f);
    EXPECT_FLOAT_EQ(mse_pred_gradient(3.0f, 1.0f, 4, 0.5f), 0.5f);  // 0.5 * 2 * 2 / 4
}

TEST(OpsMath, AdamWFirstStepByHand) {
    // step 1: m = 0.1 g, v = 0.001 g^2, so m_hat = g, v_hat = g^2 and the Adam update is
    // lr * g / (|g| + eps); decay adds lr * wd * p.
    float p = 2.0f, m = 0.0f, v = 0.0f;
    const float g = 0.5f;
    adamw_step(p, g, m, v, adamw_hyper(0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1));
    // 1 - beta2 is not exact in float (0.00099998713): relative tolerances, not equality
    EXPECT_NEAR(m, 0.05, 0.05 * 1e-6);
    EXPECT_NEAR(v, 0.00025, 0.00025 * 2e-5);
    EXPECT_NEAR(p, 2.0 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.01 * 2.0), 1e-6);
}

TEST(OpsMath, AdamWSecondStepByHand) {
    float p = 1.0f, m = 0.0f, v = 0.0f;
    adamw_step(p, 1.0f, m, v, adamw_hyper(0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, 1));
    adamw_step(p, -2.0f, m, v, adamw_hyper(0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, 2));
    // m = 0.9*0.1 - 0.2 = -0.11, v = 0.999*0.001 + 0.004 = 0.004999
    EXPECT_NEAR(m, -0.11, 0.11 * 1e-6);
    EXPECT_NEAR(v, 0.004999, 0.004999 * 2e-5);
    const double m_hat = -0.11 / (1 - 0.81), v_hat = 0.004999 / (1 - 0.998001);
    EXPECT_NEAR(p, 1.0 - 0.01 - 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8), 1e-6);
}

}  // namespace
}  // namespace parbench

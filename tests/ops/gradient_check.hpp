// Test support for the ops: seeded random data, and the central-difference gradient check
// every backward op is held to.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace parbench::testing_ops {

std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float low = -1.0f, float high = 1.0f);
std::vector<int> random_tokens(std::size_t n, int vocab, std::uint32_t seed);

// |actual_i - expected_i| <= absolute + relative |expected_i| for every i; the failure names how
// many differ and the first five.
::testing::AssertionResult all_close(const std::vector<float>& actual, const std::vector<float>& expected,
                                     double absolute, double relative);

// sum_j out_j * weights_j in double: the scalar loss whose gradient wrt out is `weights`,
// so a backward op fed dout = weights must produce d(loss)/d(input).
double weighted_sum(const std::vector<float>& out, const std::vector<float>& weights);

struct FiniteDifference {
    double step = 1e-2;               // perturbation of one float input
    double absolute_tolerance = 1e-3;  // float rounding of the loss, divided by 2*step
    double relative_tolerance = 1e-2;  // O(step^2) truncation error of the central difference
};

// Compares analytic[i] with (loss(x + h e_i) - loss(x - h e_i)) / (2h) for every i, where h is
// the perturbation actually representable in float at x_i. `loss` must rerun the forward op
// from `x`. x is restored afterwards. Reports the first mismatches.
::testing::AssertionResult matches_finite_differences(std::vector<float>& x, const std::vector<float>& analytic,
                                                      const std::function<double()>& loss,
                                                      FiniteDifference settings = {});

// Backward ops accumulate: tests pre-fill gradients with this value and subtract it after,
// so a backward that overwrites instead of adding fails the gradient check.
constexpr float gradient_prefill = 0.375f;
std::vector<float> prefilled(std::size_t n);
std::vector<float> minus_prefill(std::vector<float> gradient);

}  // namespace parbench::testing_ops

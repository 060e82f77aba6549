#include "gradient_check.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace parbench::testing_ops {

std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float low, float high) {
    std::mt19937 engine(seed);
    std::uniform_real_distribution<float> distribution(low, high);
    std::vector<float> values(n);
    for (float& value : values) value = distribution(engine);
    return values;
}

std::vector<int> random_tokens(std::size_t n, int vocab, std::uint32_t seed) {
    std::mt19937 engine(seed);
    std::uniform_int_distribution<int> distribution(0, vocab - 1);
    std::vector<int> tokens(n);
    for (int& token : tokens) token = distribution(engine);
    return tokens;
}

::testing::AssertionResult all_close(const std::vector<float>& actual, const std::vector<float>& expected,
                                     double absolute, double relative) {
    std::size_t wrong = 0;
    std::ostringstream first;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
        if (!(error <= absolute + relative * std::abs(expected[i])) && ++wrong <= 5)
            first << "\n  [" << i << "] " << actual[i] << ", expected " << expected[i];
    }
    if (wrong == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << wrong << " of " << expected.size() << " elements differ:" << first.str();
}

double weighted_sum(const std::vector<float>& out, const std::vector<float>& weights) {
    double sum = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * weights[i];
    return sum;
}

::testing::AssertionResult matches_finite_differences(std::vector<float>& x, const std::vector<float>& analytic,
                                                      const std::function<double()>& loss,
                                                      FiniteDifference settings) {
    if (x.size() != analytic.size())
        return ::testing::AssertionFailure() << "gradient has " << analytic.size() << " elements, input " << x.size();
    std::ostringstream mismatches;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const float original = x[i];
        const float up = static_cast<float>(original + settings.step);
        const float down = static_cast<float>(original - settings.step);
        x[i] = up;
        const double loss_up = loss();
        x[i] = down;
        const double loss_down = loss();
        x[i] = original;
        const double numeric = (loss_up - loss_down) / (static_cast<double>(up) - static_cast<double>(down));
        const double error = std::abs(numeric - analytic[i]);
        if (error > settings.absolute_tolerance + settings.relative_tolerance * std::abs(numeric)) {
            if (++wrong <= 5)
                mismatches << "\n  [" << i << "] analytic " << analytic[i] << ", finite difference " << numeric;
        }
    }
    if (wrong == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << wrong << " of " << x.size() << " gradient elements differ:"
                                         << mismatches.str();
}

std::vector<float> prefilled(std::size_t n) { return std::vector<float>(n, gradient_prefill); }

std::vector<float> minus_prefill(std::vector<float> gradient) {
    for (float& g : gradient) g -= gradient_prefill;
    return gradient;
}

}  // namespace parbench::testing_ops

// kernels/gradient_write_math.hpp, the per-element formulas the CUDA backward kernels run in
// both their += and first-write (=) forms, held bit for bit to the CPU ops: evaluated here on
// the host, element by element, they must give exactly what CpuOps writes, so the CPU's
// gradient checks carry over to the GPU's formulas (nvcc's FMA contraction aside, which the
// GPU tests' tolerance covers).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gradient_check.hpp"
#include "kernels/gradient_write_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

// Bit patterns, so that -0 and +0 or two NaNs are not taken for each other.
std::vector<std::uint32_t> bits(const std::vector<float>& values) {
    std::vector<std::uint32_t> out(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = std::bit_cast<std::uint32_t>(values[i]);
    return out;
}

// 1000 = 62 x 16 + 8: every vector width of the CPU loops' clones, and a remainder.
constexpr std::size_t elements = 1000;

TEST(GradientWriteMath, WriteGradientAddsOrWrites) {
    float gradient = 1.5f;
    write_gradient<GradientWrite::accumulate>(gradient, 0.25f);
    EXPECT_EQ(gradient, 1.75f);
    gradient = std::nanf("");  // a first write reads nothing
    write_gradient<GradientWrite::overwrite>(gradient, 0.25f);
    EXPECT_EQ(gradient, 0.25f);
}

TEST(GradientWriteMath, GeluMatchesTheCpuOpBitForBit) {
    CpuOps ops;
    const auto inp = random_vector(elements, 1, -6.0f, 6.0f), dout = random_vector(elements, 2);
    const auto start = random_vector(elements, 3);
    auto added = start, written = std::vector<float>(elements, std::nanf(""));
    ops.gelu_backward(added.data(), inp.data(), dout.data(), elements);
    ops.gelu_backward_overwrite(written.data(), inp.data(), dout.data(), elements);
    auto expected_added = start, expected_written = std::vector<float>(elements);
    for (std::size_t i = 0; i < elements; ++i) {
        write_gradient<GradientWrite::accumulate>(expected_added[i], gelu_input_gradient(inp[i], dout[i]));
        write_gradient<GradientWrite::overwrite>(expected_written[i], gelu_input_gradient(inp[i], dout[i]));
    }
    EXPECT_EQ(bits(added), bits(expected_added));
    EXPECT_EQ(bits(written), bits(expected_written));
}

TEST(GradientWriteMath, SwigluMatchesTheCpuOpBitForBit) {
    CpuOps ops;
    const auto gate = random_vector(elements, 4, -6.0f, 6.0f), up = random_vector(elements, 5),
               dout = random_vector(elements, 6);
    const auto gate_start = random_vector(elements, 7), up_start = random_vector(elements, 8);
    auto dgate = gate_start, dup = up_start;
    std::vector<float> dgate_written(elements, std::nanf("")), dup_written(elements, std::nanf(""));
    ops.swiglu_backward(dgate.data(), dup.data(), dout.data(), gate.data(), up.data(), elements);
    ops.swiglu_backward_overwrite(dgate_written.data(), dup_written.data(), dout.data(), gate.data(), up.data(),
                                  elements);
    auto expected_dgate = gate_start, expected_dup = up_start;
    std::vector<float> expected_dgate_written(elements), expected_dup_written(elements);
    for (std::size_t i = 0; i < elements; ++i) {
        const float g = swiglu_gate_gradient(dout[i], gate[i], up[i]), u = swiglu_up_gradient(dout[i], gate[i]);
        write_gradient<GradientWrite::accumulate>(expected_dgate[i], g);
        write_gradient<GradientWrite::accumulate>(expected_dup[i], u);
        write_gradient<GradientWrite::overwrite>(expected_dgate_written[i], g);
        write_gradient<GradientWrite::overwrite>(expected_dup_written[i], u);
    }
    EXPECT_EQ(bits(dgate), bits(expected_dgate));
    EXPECT_EQ(bits(dup), bits(expected_dup));
    EXPECT_EQ(bits(dgate_written), bits(expected_dgate_written));
    EXPECT_EQ(bits(dup_written), bits(expected_dup_written));
}

// A shard [200, 200 + V) of a larger vocabulary: about a third of the targets inside it.
TEST(GradientWriteMath, CrossentropyShardMatchesTheCpuOpBitForBit) {
    CpuOps ops;
    const int BT = 12, V = 133;  // 133 = 8 x 16 + 5
    const VocabShard shard{200, V};
    const auto logits = random_vector(static_cast<std::size_t>(BT * V), 9, -8.0f, 8.0f);
    const auto dlosses = random_vector(BT, 10);
    const auto targets = random_tokens(BT, 600, 11);
    std::vector<float> maxes(BT), sums(BT);
    ops.row_max(maxes.data(), logits.data(), BT, V);
    ops.row_sum_exp(sums.data(), logits.data(), maxes.data(), BT, V);
    const auto start = random_vector(logits.size(), 12);
    auto added = start;
    std::vector<float> written(logits.size(), std::nanf(""));
    ops.crossentropy_shard_backward(added.data(), dlosses.data(), logits.data(), maxes.data(), sums.data(),
                                    targets.data(), BT, V, shard);
    ops.crossentropy_shard_backward_overwrite(written.data(), dlosses.data(), logits.data(), maxes.data(),
                                              sums.data(), targets.data(), BT, V, shard);
    auto expected_added = start;
    std::vector<float> expected_written(logits.size());
    int targets_inside = 0;
    for (int i = 0; i < BT; ++i) {
        const float inverse_sum = 1.0f / sums[i];
        targets_inside += shard.contains(targets[i]) ? 1 : 0;
        for (int v = 0; v < V; ++v) {
            const std::size_t k = static_cast<std::size_t>(i * V + v);
            const float p = crossentropy_probability(logits[k], maxes[i], inverse_sum);
            const bool is_target = v == targets[i] - shard.start;
            write_crossentropy_gradient<GradientWrite::accumulate>(expected_added[k], p, is_target, dlosses[i]);
            write_crossentropy_gradient<GradientWrite::overwrite>(expected_written[k], p, is_target, dlosses[i]);
        }
    }
    ASSERT_GT(targets_inside, 0);
    ASSERT_LT(targets_inside, BT);
    EXPECT_EQ(bits(added), bits(expected_added));
    EXPECT_EQ(bits(written), bits(expected_written));
}

// The whole-vocabulary backward from the forward's probabilities: the same two terms.
TEST(GradientWriteMath, CrossentropyFromProbabilitiesMatchesTheCpuOpBitForBit) {
    CpuOps ops;
    const int BT = 7, V = 77;
    const auto logits = random_vector(static_cast<std::size_t>(BT * V), 13, -8.0f, 8.0f);
    const auto dlosses = random_vector(BT, 14);
    const auto targets = random_tokens(BT, V, 15);
    std::vector<float> losses(BT), probs(logits.size());
    ops.crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), BT, V);
    const auto start = random_vector(logits.size(), 16);
    auto added = start, expected = start;
    ops.crossentropy_backward(added.data(), dlosses.data(), probs.data(), targets.data(), BT, V);
    for (int i = 0; i < BT; ++i)
        for (int v = 0; v < V; ++v) {
            const std::size_t k = static_cast<std::size_t>(i * V + v);
            write_crossentropy_gradient<GradientWrite::accumulate>(expected[k], probs[k], v == targets[i], dlosses[i]);
        }
    EXPECT_EQ(bits(added), bits(expected));
}

// The probabilities the forward writes: exp(x - max) times the row's 1 / sum.
TEST(GradientWriteMath, CrossentropyProbabilityMatchesTheCpuForwardBitForBit) {
    CpuOps ops;
    const int BT = 5, V = 77;
    const auto logits = random_vector(static_cast<std::size_t>(BT * V), 17, -8.0f, 8.0f);
    const auto targets = random_tokens(BT, V, 18);
    std::vector<float> losses(BT), probs(logits.size()), maxes(BT), sums(BT);
    ops.crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), BT, V);
    ops.row_max(maxes.data(), logits.data(), BT, V);
    ops.row_sum_exp(sums.data(), logits.data(), maxes.data(), BT, V);
    std::vector<float> expected(logits.size());
    for (int i = 0; i < BT; ++i)
        for (int v = 0; v < V; ++v) {
            const std::size_t k = static_cast<std::size_t>(i * V + v);
            expected[k] = crossentropy_probability(logits[k], maxes[i], 1.0f / sums[i]);
        }
    EXPECT_EQ(bits(probs), bits(expected));
}

}  // namespace
}  // namespace parbench

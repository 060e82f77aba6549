#include "train/synthetic_data.hpp"

#include <cmath>
#include <stdexcept>

#include "core/counter_rng.hpp"

namespace parbench {
namespace {

// Streams of the data, apart from the parameter streams (tensor ids are small).
constexpr std::uint64_t token_stream = 0xda7a'0001ULL << 20;
constexpr std::uint64_t regression_stream = 0xda7a'0002ULL << 20;

}  // namespace

void synthetic_tokens(std::uint64_t seed, std::uint64_t first_sample, int count, int seq_len, int vocab,
                      std::span<int> tokens, std::span<int> targets) {
    const auto per_sample = static_cast<std::size_t>(seq_len);
    if (tokens.size() < per_sample * static_cast<std::size_t>(count) || targets.size() < tokens.size())
        throw std::logic_error("synthetic_tokens: buffers too small");
    for (int b = 0; b < count; ++b) {
        const std::uint64_t sample = first_sample + static_cast<std::uint64_t>(b);
        const std::uint64_t start = counter_hash(seed, token_stream, 2 * sample) % static_cast<std::uint64_t>(vocab);
        const std::uint64_t stride = 1 + counter_hash(seed, token_stream, 2 * sample + 1) % 7;
        for (std::size_t t = 0; t < per_sample; ++t) {
            const std::size_t at = static_cast<std::size_t>(b) * per_sample + t;
            tokens[at] = static_cast<int>((start + stride * t) % static_cast<std::uint64_t>(vocab));
            targets[at] = static_cast<int>((start + stride * (t + 1)) % static_cast<std::uint64_t>(vocab));
        }
    }
}

void synthetic_regression(std::uint64_t seed, std::uint64_t first_sample, int count, int width,
                          std::span<float> inputs, std::span<float> targets) {
    const auto per_sample = static_cast<std::size_t>(width);
    if (inputs.size() < per_sample * static_cast<std::size_t>(count) || targets.size() < inputs.size())
        throw std::logic_error("synthetic_regression: buffers too small");
    for (int b = 0; b < count; ++b) {
        const std::uint64_t sample = first_sample + static_cast<std::uint64_t>(b);
        for (std::size_t j = 0; j < per_sample; ++j) {
            const std::size_t at = static_cast<std::size_t>(b) * per_sample + j;
            inputs[at] = counter_normal(seed, regression_stream, sample * per_sample + j);
            targets[at] = std::sin(inputs[at]);
        }
    }
}

}  // namespace parbench

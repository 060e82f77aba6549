#include "core/counter_rng.hpp"

#include <cmath>
#include <numbers>

namespace parbench {

float counter_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
    const std::uint64_t bits = counter_hash(seed, stream, index) >> 40;  // top 24 bits
    return (static_cast<float>(bits) + 0.5f) / 16777216.0f;
}

float counter_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
    // Two independent uniforms: the index picks the pair, the low bit of the stream word
    // (shifted out of the caller's range) picks the member.
    const double u1 = counter_uniform(seed, stream << 1, index);
    const double u2 = counter_uniform(seed, (stream << 1) | 1, index);
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

}  // namespace parbench

// Counter-based random numbers: a value is a pure function of (seed, stream, index), so any
// rank can produce any slice of a tensor or of the data set alone, and every layout of the
// same run sees the same numbers (the idea of Philox / Random123, Salmon et al. SC'11, with
// SplitMix64's finaliser as the mixing function).
#pragma once

#include <cstdint>

namespace parbench {

// Stafford's "Mix13" finaliser as used by SplitMix64: a bijection on 64 bits whose output
// bits each depend on every input bit.
constexpr std::uint64_t mix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

constexpr std::uint64_t counter_hash(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
    return mix64(seed ^ mix64(stream ^ mix64(index)));
}

// Uniform in (0, 1), 24 bits: exactly representable in float.
float counter_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);
// Standard normal by Box-Muller from two uniforms of the same index.
float counter_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

}  // namespace parbench

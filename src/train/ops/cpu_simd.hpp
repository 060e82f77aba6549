// What the CPU ops' hot loops need to vectorise while the binary still runs on any x86-64:
// - PARBENCH_SIMD_CLONES: GCC/Clang function multiversioning, an AVX-512, an AVX2 and the baseline
//   (SSE2) body of the same function, picked at load time by the CPU's features. No FMA in
//   any (the project compiles with -std=c++20, so no contraction), so all give the same
//   bits: the clones differ in vector width only.
// - Reductions in a fixed order: a float sum vectorises only if its order may change, so
//   these keep `lanes` partial sums, element i into lane i % lanes, then add the lanes in
//   order. The vectoriser maps the lanes to registers; the result is the same bits on every
//   machine and with any vector width.
#pragma once

#include <cstddef>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__CUDACC__)
#define PARBENCH_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PARBENCH_SIMD_CLONES
#endif

namespace parbench::simd {

inline constexpr std::size_t lanes = 16;

// sum_i f(i) over [0, n), f called once per element, in the lane order above.
template <typename Term>
inline float lane_sum(std::size_t n, Term term) {
    float partial[lanes] = {};
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes)
        for (std::size_t l = 0; l < lanes; ++l) partial[l] += term(i + l);
    for (std::size_t l = 0; i + l < n; ++l) partial[l] += term(i + l);
    float total = 0.0f;
    for (std::size_t l = 0; l < lanes; ++l) total += partial[l];
    return total;
}

// max_i x[i] over [0, n), n >= 1 (order does not matter for max, NaN aside).
inline float lane_max(const float* x, std::size_t n) {
    float partial[lanes];
    for (std::size_t l = 0; l < lanes; ++l) partial[l] = x[0];
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes)
        for (std::size_t l = 0; l < lanes; ++l) partial[l] = x[i + l] > partial[l] ? x[i + l] : partial[l];
    for (std::size_t l = 0; i + l < n; ++l) partial[l] = x[i + l] > partial[l] ? x[i + l] : partial[l];
    float best = partial[0];
    for (std::size_t l = 1; l < lanes; ++l) best = partial[l] > best ? partial[l] : best;
    return best;
}

}  // namespace parbench::simd

// What the CPU ops' hot loops need to vectorise while the binary still runs on any x86-64:
// - One body per instruction-set path, chosen at run time (device/cpu_kernels.hpp): a loop
//   written once as a PARBENCH_SIMD_LOOP function is compiled three times, for AVX-512F, for
//   AVX2 and for the baseline (SSE2), by inlining it into simd::run's entry for the path, and
//   the CpuOps's path picks the entry. Unlike function multiversioning (target_clones, which
//   picks at load time), a test can run every path this CPU executes. No FMA in any (the ops
//   compile with -ffp-contract=off, CMakeLists.txt), so all give the same bits: the paths
//   differ in vector width only.
// - Reductions in a fixed order: a float sum vectorises only if its order may change, so
//   these keep `lanes` partial sums, element i into lane i % lanes, then add the lanes in
//   order. The vectoriser maps the lanes to registers; the result is the same bits on every
//   machine and with any vector width.
// - PARBENCH_CPU_BASELINE_BUILD (CMake's parbench_cpu_ops_baseline, for the ops test that proves
//   the baseline path): every path runs the baseline body and nothing wider is compiled.
#pragma once

#include <cstddef>

#include "device/cpu_kernels.hpp"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__CUDACC__) && !defined(PARBENCH_CPU_BASELINE_BUILD)
#define PARBENCH_SIMD_DISPATCH 1
#else
#define PARBENCH_SIMD_DISPATCH 0
#endif

// A loop simd::run compiles per path: always inlined, so that it takes the entry's instruction set.
#define PARBENCH_SIMD_LOOP [[gnu::always_inline]] inline
// The lambda handed to simd::run, likewise: [&]() PARBENCH_SIMD_BODY { loop(...); }
#define PARBENCH_SIMD_BODY __attribute__((always_inline))

namespace parbench::simd {

inline constexpr std::size_t lanes = 16;

// The widest path this build holds.
inline constexpr CpuKernels widest_built = PARBENCH_SIMD_DISPATCH ? CpuKernels::avx512 : CpuKernels::baseline;

#if PARBENCH_SIMD_DISPATCH
template <typename Body>
__attribute__((target("avx512f"))) void run_avx512(const Body& body) {
    body();
}
template <typename Body>
__attribute__((target("avx2"))) void run_avx2(const Body& body) {
    body();
}
#endif

// body() compiled for `kernels` (at most widest_built; the caller checked the CPU runs it).
template <typename Body>
void run(CpuKernels kernels, const Body& body) {
#if PARBENCH_SIMD_DISPATCH
    if (kernels == CpuKernels::avx512) return run_avx512(body);
    if (kernels == CpuKernels::avx2) return run_avx2(body);
#endif
    (void)kernels;
    body();
}

// sum_i f(i) over [0, n), f called once per element, in the lane order above.
template <typename Term>
PARBENCH_SIMD_LOOP float lane_sum(std::size_t n, Term term) {
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
PARBENCH_SIMD_LOOP float lane_max(const float* x, std::size_t n) {
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

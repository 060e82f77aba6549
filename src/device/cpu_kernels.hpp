// Which instruction set the CPU ops' hot loops run in (train/ops/cpu_simd.hpp), chosen at run time, and which
// kernels OpenBLAS chose for the matmuls: what a CPU figure or a --check was computed with, so that runs on
// two kinds of CPU can be told apart (reports' environment, info).
//
//   avx512    the loops compiled for AVX-512F (16 floats a vector); matmuls in OpenBLAS
//   avx2      the loops compiled for AVX2; the matmuls of a few rows in skinny_gemm (AVX2 + FMA),
//             the others in OpenBLAS
//   baseline  the loops compiled for x86-64's SSE2 (any x86-64 CPU); matmuls in OpenBLAS
//
// The widest path the CPU can run is the default; PARBENCH_CPU_KERNELS=baseline|avx2|avx512 picks a narrower
// one (the tests run every path this CPU can, so one machine covers what others pick). OpenBLAS chooses its
// own kernels when it loads, from the CPU or OPENBLAS_CORETYPE.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parbench {

enum class CpuKernels { baseline, avx2, avx512 };  // narrowest first

std::string_view cpu_kernels_name(CpuKernels kernels);
std::optional<CpuKernels> parse_cpu_kernels(std::string_view name);

// The paths this CPU can execute, narrowest first (baseline always; avx2 needs AVX2 and FMA, avx512 AVX-512F
// too).
std::vector<CpuKernels> cpu_kernels_runnable();

struct CpuKernelChoice {
    CpuKernels kernels = CpuKernels::baseline;
    bool forced = false;  // by PARBENCH_CPU_KERNELS rather than the widest this CPU runs
};

// PARBENCH_CPU_KERNELS when set, else the widest runnable path. A value that names no path, or a path this
// CPU cannot execute, is a UsageError naming the variable and the choices.
CpuKernelChoice choose_cpu_kernels();

// "avx512 (the widest this CPU runs)" or "avx2 (PARBENCH_CPU_KERNELS; this CPU runs up to avx512)".
std::string describe(const CpuKernelChoice& choice);

// OpenBLAS's own choice, read from the loaded library (none of these when the BLAS in use is not OpenBLAS):
// its version and build ("OpenBLAS 0.3.21 DYNAMIC_ARCH ..."), and the kernels ("core") it picked for this
// CPU, e.g. "SapphireRapids", "Haswell", "Zen".
struct BlasLibrary {
    std::string config;  // openblas_get_config(), or "not OpenBLAS"
    std::string core;    // openblas_get_corename(), or empty
};
BlasLibrary blas_library();

}  // namespace parbench

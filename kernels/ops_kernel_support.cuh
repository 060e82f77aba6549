// Launch geometry and warp reductions shared by the training-op kernels (*.cu only).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace parbench::ops_kernels {

constexpr unsigned threads_per_block = 256;  // whole warps, so warp-per-row kernels fill blocks
constexpr unsigned warps_per_block = threads_per_block / 32;
// Enough blocks to fill any current GPU several times; grid-stride loops cover the rest.
constexpr std::size_t max_blocks = 8192;
constexpr unsigned full_warp = 0xffffffffu;

// Blocks for one thread per element, elementwise kernels with grid-stride loops.
inline unsigned blocks_for(std::size_t count) {
    const std::size_t needed = (count + threads_per_block - 1) / threads_per_block;
    return static_cast<unsigned>(std::clamp<std::size_t>(needed, 1, max_blocks));
}

// Blocks for one warp per row, row-wise kernels with a grid-stride loop over rows.
inline unsigned blocks_for_rows(std::size_t rows) {
    const std::size_t needed = (rows + warps_per_block - 1) / warps_per_block;
    return static_cast<unsigned>(std::clamp<std::size_t>(needed, 1, max_blocks));
}

__device__ inline std::size_t global_thread() {
    return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t grid_threads() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }
__device__ inline std::size_t global_warp() { return global_thread() / 32; }
__device__ inline std::size_t grid_warps() { return grid_threads() / 32; }
__device__ inline unsigned lane() { return threadIdx.x % 32; }

// Every lane returns the warp's sum (xor butterfly), so no broadcast is needed after.
__device__ inline float warp_sum(float value) {
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(full_warp, value, offset);
    return value;
}

__device__ inline float warp_max(float value) {
    for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(full_warp, value, offset));
    return value;
}

// Sums down the N rows of an (N, C) layout, per column: parameter gradients (bias, norm
// weights). A block of column_sum_warps warps per 32 neighbouring columns, where a thread per
// column would leave all but C threads of the GPU idle, each walking every row. Launch with
// column_sum_threads threads and blocks_for_columns(C) blocks; the kernel declares
// __launch_bounds__(column_sum_threads), so ptxas keeps its registers within what 1024 threads
// of a block may use.
constexpr unsigned column_sum_warps = 32;
constexpr unsigned column_sum_threads = column_sum_warps * 32;

inline unsigned blocks_for_columns(std::size_t columns) {
    return static_cast<unsigned>(std::clamp<std::size_t>((columns + 31) / 32, 1, max_blocks));
}

// Lane l takes column first + l and warp w the rows w, w + column_sum_warps, ... (a warp reads 32
// neighbouring floats of a row at a time); add_terms(n, c, sums) adds row n's K terms of column
// c into sums[0..K). The warps' partial sums are then added in warp order through shared
// memory, and land(c, totals) receives column c's K totals once: deterministic, no atomics.
template <int K, typename AddTerms, typename Land>
__device__ void column_sums(std::size_t N, std::size_t C, AddTerms add_terms, Land land) {
    __shared__ float partial[K][column_sum_warps][32];
    const unsigned warp = threadIdx.x / 32;
    for (std::size_t first = static_cast<std::size_t>(blockIdx.x) * 32; first < C;
         first += static_cast<std::size_t>(gridDim.x) * 32) {
        const std::size_t c = first + lane();
        float sums[K] = {};
        if (c < C)
            for (std::size_t n = warp; n < N; n += column_sum_warps) add_terms(n, c, sums);
        for (int k = 0; k < K; ++k) partial[k][warp][lane()] = sums[k];
        __syncthreads();
        if (warp == 0 && c < C) {
            float totals[K] = {};
            for (unsigned w = 0; w < column_sum_warps; ++w)
                for (int k = 0; k < K; ++k) totals[k] += partial[k][w][lane()];
            land(c, totals);
        }
        __syncthreads();  // the next columns' partial sums overwrite these
    }
}

}  // namespace parbench::ops_kernels

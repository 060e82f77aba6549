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

}  // namespace parbench::ops_kernels

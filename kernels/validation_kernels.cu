// Validation on the GPU with the same per-element formulas the CPU device loops over
// (kernels/validation_data.hpp): one thread per element in a grid-stride loop, so any
// count fits one launch. Elements are addressed through store_element/load_element, which
// switch on the type per element; validation is never timed, so simplicity wins here.
#include "kernels/validation_kernels.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"

namespace parbench {
namespace {

constexpr unsigned threads_per_block = 256;  // whole warps: the warp reduction below needs them
// Enough blocks to fill any current GPU several times over; the grid-stride loop does the rest.
constexpr std::size_t max_blocks = 4096;
constexpr unsigned full_warp = 0xffffffffu;

unsigned blocks_for(std::size_t count) {
    const std::size_t needed = (count + threads_per_block - 1) / threads_per_block;
    return static_cast<unsigned>(std::min(needed, max_blocks));
}

__global__ void fill_input_kernel(void* base, std::size_t count, DType type, InputPattern pattern) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
        store_element(base, i, type, input_value(pattern, pattern.rank, i));
}

// Each thread counts its misses, a warp sums them with shuffles, and one atomic per warp
// (only when the warp found something) adds them to the counter: correct data, the usual
// case, costs no atomics at all.
__global__ void count_wrong_kernel(const void* base, std::size_t count, DType type, ExpectedLayout layout,
                                   unsigned long long* wrong) {
    unsigned long long misses = 0;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count; k += stride)
        if (!element_matches(layout, load_element(base, k, type), k, type)) ++misses;
    for (unsigned offset = warpSize / 2; offset > 0; offset /= 2) misses += __shfl_down_sync(full_warp, misses, offset);
    if ((threadIdx.x % warpSize) == 0 && misses != 0) atomicAdd(wrong, misses);
}

}  // namespace

void launch_fill_input(void* base, std::size_t count, DType type, const InputPattern& pattern, GpuStream stream) {
    NvtxRange range("fill_input");
    if (count == 0) return;
    fill_input_kernel<<<blocks_for(count), threads_per_block, 0, stream>>>(base, count, type, pattern);
    check_cuda(cudaGetLastError(), "fill_input_kernel launch");
}

void launch_count_wrong(const void* base, std::size_t count, DType type, const ExpectedLayout& layout,
                        unsigned long long* device_counter, GpuStream stream) {
    NvtxRange range("count_wrong");
    check_cuda(cudaMemsetAsync(device_counter, 0, sizeof *device_counter, stream), "cudaMemsetAsync(counter)");
    if (count == 0) return;
    count_wrong_kernel<<<blocks_for(count), threads_per_block, 0, stream>>>(base, count, type, layout,
                                                                            device_counter);
    check_cuda(cudaGetLastError(), "count_wrong_kernel launch");
}

}  // namespace parbench

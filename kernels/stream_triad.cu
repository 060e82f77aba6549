// The STREAM triad on the GPU: a grid-stride loop of one thread per element, enough blocks to
// keep every SM's memory pipeline full; the per-element formula is the CPU load's.
#include "kernels/stream_triad.hpp"

#include "kernels/ops_kernel_support.cuh"
#include "kernels/stream_triad_math.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void stream_triad_kernel(float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ c,
                                    std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) a[i] = stream_triad(b[i], c[i]);
}

}  // namespace

void launch_stream_triad(float* a, const float* b, const float* c, std::size_t n, GpuStream stream) {
    stream_triad_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(a, b, c, n);
}

}  // namespace parbench

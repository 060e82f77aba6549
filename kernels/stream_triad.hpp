// Host launcher of the STREAM triad kernel (kernels/stream_triad_math.hpp), the GPU's
// --background stream load. No CUDA header here: the stream is the opaque CUstream_st* that
// cudaStream_t is. The launcher enqueues and returns without checking: kernels/ does not include
// device/, so the caller checks the launch (cudaGetLastError) where CUDA errors become exceptions.
#pragma once

#include <cstddef>

struct CUstream_st;

namespace parbench {

using GpuStream = CUstream_st*;

// a[i] = stream_triad(b[i], c[i]) for i in [0, n), enqueued on `stream`.
void launch_stream_triad(float* a, const float* b, const float* c, std::size_t n, GpuStream stream);

}  // namespace parbench

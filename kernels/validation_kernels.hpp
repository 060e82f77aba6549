// Host launchers of the validation kernels: fill a buffer with the inputs of
// validation_data.hpp and count the elements that differ from the expected output, both
// on the GPU where the data lives. No CUDA header here: a stream is passed as the opaque
// CUstream_st* that cudaStream_t is, so CPU-only code may include this file.
#pragma once

#include <cstddef>

#include "kernels/validation_data.hpp"

struct CUstream_st;

namespace parbench {

using GpuStream = CUstream_st*;

// Writes input_value(pattern, pattern.rank, i) to element i, i in [0, count), of `base`
// (device memory) as `type`. Enqueued on `stream`; returns without waiting.
void launch_fill_input(void* base, std::size_t count, DType type, const InputPattern& pattern, GpuStream stream);

// Sets *device_counter (device memory) to the number of elements k in [0, count) of `base`
// for which element_matches(layout, ...) is false. Enqueued on `stream`; returns without
// waiting, so the caller copies the counter back on the same stream.
void launch_count_wrong(const void* base, std::size_t count, DType type, const ExpectedLayout& layout,
                        unsigned long long* device_counter, GpuStream stream);

}  // namespace parbench

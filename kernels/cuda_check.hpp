// The CUDA runtime's return codes become exceptions here, for the kernels' launchers and for
// every CUDA-built file above them (device/cuda_check.hpp adds NCCL's). Each failure names the
// call, where it was made (file:line of the caller, via std::source_location, so no macro is
// needed) and the rank and host, because on a 64-GPU job "invalid argument" alone tells nobody
// which process to look at. It sits in kernels/, the lowest floor that calls CUDA, so that the
// kernels include nothing of device/ (docs/architecture.md). Included by CUDA-built files only.
#pragma once

#include <cuda_runtime_api.h>

#include <source_location>
#include <string>

namespace parbench {

// Throws RuntimeFailure when code is not cudaSuccess.
void check_cuda(cudaError_t code, const char* call, std::source_location where = std::source_location::current());

// "rank 3 on node12", or "pid 4242 on node12" before MPI starts.
std::string where_this_process_runs();

// "src/train/ops/cuda_ops_cuda.cpp:25, rank 3 on node12": what a failed call's message puts in
// parentheses after the call.
std::string failed_call_origin(const std::source_location& where);

}  // namespace parbench

// cuBLAS for the CUDA code that runs GEMMs (the training ops, the --background gemm load): its
// status codes become exceptions here, in one place, and its handle is owned. Included by
// CUDA-built files only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <source_location>

namespace parbench {

// Throws RuntimeFailure naming the call, where it was made, and the rank and host, when status
// is not CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t status, const char* call,
                  std::source_location where = std::source_location::current());

// A cuBLAS handle bound to one stream, with its workspace given to it once: left to itself,
// cuBLAS may cudaMalloc one on first use of a stream, inside a timed region (an implicit host
// sync) or during CUDA graph capture (an error). 32 MiB is what the cuBLAS documentation advises
// for Hopper (4 MiB before it); the larger serves both.
class CublasHandle {
  public:
    static constexpr std::size_t workspace_bytes = 32u << 20;

    explicit CublasHandle(cudaStream_t stream);
    // Destruction must not throw; a failure here leaks nothing we could still free.
    ~CublasHandle();
    CublasHandle(const CublasHandle&) = delete;
    CublasHandle& operator=(const CublasHandle&) = delete;
    cublasHandle_t get() const { return handle_; }

  private:
    std::shared_ptr<void> workspace_;  // declared first: freed after the handle that uses it
    cublasHandle_t handle_ = nullptr;
};

}  // namespace parbench

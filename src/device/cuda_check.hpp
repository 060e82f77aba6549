// The one place CUDA and NCCL return codes become exceptions. Each failure names the call,
// where it was made (file:line of the caller, via std::source_location, so no macro is
// needed) and the rank and host, because on a 64-GPU job "invalid argument" alone tells
// nobody which process to look at. Included by CUDA-built files only.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <source_location>
#include <string>

namespace parbench {

// Throws RuntimeFailure when code is not cudaSuccess.
void check_cuda(cudaError_t code, const char* call, std::source_location where = std::source_location::current());

// Throws RuntimeFailure when code is not ncclSuccess; with `comm`, adds ncclGetLastError's
// detail, which usually says which peer or transport failed.
void check_nccl(ncclResult_t code, const char* call, ncclComm_t comm = nullptr,
                std::source_location where = std::source_location::current());

// "rank 3 on node12", or "pid 4242 on node12" before MPI starts.
std::string where_this_process_runs();

// "13.0" from CUDA's integer version 13000.
std::string cuda_version_text(int version);
// "2.28.3" from NCCL's integer version 22803.
std::string nccl_version_text(int version);

// Selects a GPU for the calling thread for one scope and restores the previous selection,
// so CUDA work issued on behalf of one device never lands on another.
class CurrentDeviceScope {
  public:
    explicit CurrentDeviceScope(int device);
    ~CurrentDeviceScope();
    CurrentDeviceScope(const CurrentDeviceScope&) = delete;
    CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;

  private:
    int previous_ = 0;
    bool restore_ = false;
};

}  // namespace parbench

// The one place NCCL return codes become exceptions, beside the CUDA runtime's
// (kernels/cuda_check.hpp, whose check_cuda this header brings along): each failure names the
// call, where it was made and the rank and host. Included by CUDA-built files only.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <source_location>
#include <string>

#include "kernels/cuda_check.hpp"

namespace parbench {

// Throws RuntimeFailure when code is not ncclSuccess; with `comm`, adds ncclGetLastError's
// detail, which usually says which peer or transport failed.
void check_nccl(ncclResult_t code, const char* call, ncclComm_t comm = nullptr,
                std::source_location where = std::source_location::current());

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

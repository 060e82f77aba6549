#include "device/cuda_check.hpp"

#include "core/error.hpp"

namespace parbench {

void check_nccl(ncclResult_t code, const char* call, ncclComm_t comm, std::source_location where) {
    if (code == ncclSuccess) return;
    std::string message = std::string(call) + " failed (" + failed_call_origin(where) + "): " + ncclGetErrorString(code);
    const char* detail = ncclGetLastError(comm);
    if (detail != nullptr && detail[0] != '\0') message += ": " + std::string(detail);
    if (code == ncclSystemError || code == ncclRemoteError)
        message += "\nHINT: rerun with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,NET) to see which peer and "
                   "transport failed";
    throw RuntimeFailure(message);
}

std::string cuda_version_text(int version) {
    return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// NCCL encodes 2.9 and later as major*10000 + minor*100 + patch (NCCL_VERSION in nccl.h).
std::string nccl_version_text(int version) {
    return std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
           std::to_string(version % 100);
}

CurrentDeviceScope::CurrentDeviceScope(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ == device) return;
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    restore_ = true;
}

CurrentDeviceScope::~CurrentDeviceScope() {
    // Best effort: a destructor cannot report, and the previous device was valid a moment ago.
    if (restore_) (void)cudaSetDevice(previous_);
}

}  // namespace parbench

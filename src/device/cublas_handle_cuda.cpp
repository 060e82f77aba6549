#include "device/cublas_handle.hpp"

#include <string>

#include "core/error.hpp"
#include "device/cuda_check.hpp"
#include "device/cuda_device.hpp"

namespace parbench {

void check_cublas(cublasStatus_t status, const char* call, std::source_location where) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    throw RuntimeFailure(std::string(call) + " failed (" + where.file_name() + ":" + std::to_string(where.line()) +
                         ", " + where_this_process_runs() + "): " + cublasGetStatusName(status) + ": " +
                         cublasGetStatusString(status));
}

CublasHandle::CublasHandle(cudaStream_t stream) : workspace_(allocate_device_memory(workspace_bytes)) {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    try {
        check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
        // After cublasSetStream, which resets the workspace to cuBLAS's default.
        check_cublas(cublasSetWorkspace(handle_, workspace_.get(), workspace_bytes), "cublasSetWorkspace");
    } catch (...) {
        cublasDestroy(handle_);
        throw;
    }
}

CublasHandle::~CublasHandle() { cublasDestroy(handle_); }

}  // namespace parbench

#include "device/cuda_check.hpp"

#include <mpi.h>
#include <unistd.h>

#include <climits>

#include "core/error.hpp"

namespace parbench {
namespace {

std::string location(const std::source_location& where) {
    std::string file = where.file_name();
    const auto slash = file.rfind("/src/");
    if (slash != std::string::npos) file = file.substr(slash + 1);
    return file + ":" + std::to_string(where.line());
}

}  // namespace

std::string where_this_process_runs() {
    char host[HOST_NAME_MAX + 1] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) {
        int rank = -1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        return "rank " + std::to_string(rank) + " on " + host;
    }
    return "pid " + std::to_string(getpid()) + " on " + host;
}

void check_cuda(cudaError_t code, const char* call, std::source_location where) {
    if (code == cudaSuccess) return;
    throw RuntimeFailure(std::string(call) + " failed (" + location(where) + ", " + where_this_process_runs() +
                         "): " + cudaGetErrorName(code) + ": " + cudaGetErrorString(code));
}

void check_nccl(ncclResult_t code, const char* call, ncclComm_t comm, std::source_location where) {
    if (code == ncclSuccess) return;
    std::string message = std::string(call) + " failed (" + location(where) + ", " + where_this_process_runs() +
                          "): " + ncclGetErrorString(code);
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

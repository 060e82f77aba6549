#include "kernels/cuda_check.hpp"

#include <mpi.h>
#include <unistd.h>

#include <climits>

#include "core/error.hpp"

namespace parbench {

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

std::string failed_call_origin(const std::source_location& where) {
    std::string file = where.file_name();
    const auto slash = file.rfind("/src/");
    if (slash != std::string::npos) file = file.substr(slash + 1);
    return file + ":" + std::to_string(where.line()) + ", " + where_this_process_runs();
}

void check_cuda(cudaError_t code, const char* call, std::source_location where) {
    if (code == cudaSuccess) return;
    throw RuntimeFailure(std::string(call) + " failed (" + failed_call_origin(where) + "): " + cudaGetErrorName(code) +
                         ": " + cudaGetErrorString(code));
}

}  // namespace parbench

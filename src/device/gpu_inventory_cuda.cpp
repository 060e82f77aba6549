#include <cuda_runtime_api.h>
#include <nccl.h>


#include "device/cuda_check.hpp"
#include "device/gpu_inventory.hpp"
#include "device/gpu_inventory_cuda.hpp"

namespace parbench {
namespace {

std::string describe_failure(cudaError_t code, const char* call) {
    (void)cudaGetLastError();
    return std::string(call) + ": " + cudaGetErrorName(code) + ": " + cudaGetErrorString(code);
}

}  // namespace

// A missing driver or device is an answer, not a failure; a GPU that fails mid-query is a
// failure worth its exception (check_cuda).
GpuInventory query_cuda_gpu_inventory() {
    GpuInventory inventory;
    inventory.built_with_cuda = true;
    int runtime = 0;
    check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    inventory.cuda_runtime = cuda_version_text(runtime);
    int nccl = 0;
    check_nccl(ncclGetVersion(&nccl), "ncclGetVersion");
    inventory.nccl = nccl_version_text(nccl);

    int driver = 0;
    if (const cudaError_t status = cudaDriverGetVersion(&driver); status != cudaSuccess) {
        inventory.unavailable_reason = describe_failure(status, "cudaDriverGetVersion");
        return inventory;
    }
    if (driver == 0) {
        inventory.unavailable_reason = "no NVIDIA driver is installed (libcuda.so not found)";
        return inventory;
    }
    inventory.cuda_driver = cuda_version_text(driver);

    int count = 0;
    if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
        inventory.unavailable_reason = describe_failure(status, "cudaGetDeviceCount");
        return inventory;
    }
    if (count == 0) {
        inventory.unavailable_reason = "the driver sees no GPU (check CUDA_VISIBLE_DEVICES)";
        return inventory;
    }
    for (int index = 0; index < count; ++index) {
        cudaDeviceProp properties{};
        check_cuda(cudaGetDeviceProperties(&properties, index), "cudaGetDeviceProperties");
        char bus_id[32] = {};
        check_cuda(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, index), "cudaDeviceGetPCIBusId");
        inventory.gpus.push_back({index, properties.name, properties.totalGlobalMem, bus_id,
                                  std::to_string(properties.major) + "." + std::to_string(properties.minor)});
    }
    inventory.peer_access.assign(static_cast<std::size_t>(count), std::vector<bool>(static_cast<std::size_t>(count)));
    for (int a = 0; a < count; ++a)
        for (int b = 0; b < count; ++b) {
            int can = 0;
            if (a != b) check_cuda(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
            inventory.peer_access[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] = a == b || can != 0;
        }
    return inventory;
}

}  // namespace parbench

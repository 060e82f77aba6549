// The answer of a build without CUDA; the CUDA build's query is gpu_inventory_cuda.cpp.
#include "device/gpu_inventory.hpp"

#if !defined(PARBENCH_HAVE_CUDA)
namespace parbench {

GpuInventory query_gpu_inventory() {
    GpuInventory inventory;
    inventory.unavailable_reason =
        "this parbench was built without CUDA (PARBENCH_CUDA=OFF or no nvcc found at configure time)";
    return inventory;
}

}  // namespace parbench
#endif

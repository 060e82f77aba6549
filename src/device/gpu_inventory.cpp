// The GPU inventory of this host: the CUDA plugin's answer (device/cuda_plugin.hpp), or why
// there is none (a build without CUDA, a plugin that did not load).
#include "device/gpu_inventory.hpp"

#include "device/cuda_plugin.hpp"

namespace parbench {

GpuInventory query_gpu_inventory() {
    const CudaPlugin& plugin = cuda_plugin();
    if (plugin.entries != nullptr) return plugin.entries->query_gpu_inventory();
    GpuInventory inventory;
    inventory.built_with_cuda = plugin.built;
    inventory.unavailable_reason = plugin.unavailable_reason;
    return inventory;
}

}  // namespace parbench

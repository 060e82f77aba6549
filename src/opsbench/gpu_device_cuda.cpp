#include "device/cuda_device.hpp"
#include "device/gpu_inventory.hpp"
#include "opsbench/gpu_device.hpp"

namespace parbench {

std::unique_ptr<Device> open_first_gpu(std::string& why_not) {
    const GpuInventory inventory = query_gpu_inventory();
    if (inventory.gpus.empty()) {
        why_not = inventory.unavailable_reason.empty() ? "no GPU visible" : inventory.unavailable_reason;
        return nullptr;
    }
    return std::make_unique<CudaDevice>(0);
}

}  // namespace parbench

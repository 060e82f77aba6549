// The CUDA plugin's inventory query (gpu_inventory_cuda.cpp); the core asks through
// query_gpu_inventory(), which reaches it by the plugin's entry table.
#pragma once

#include "device/gpu_inventory.hpp"

namespace parbench {

GpuInventory query_cuda_gpu_inventory();

}  // namespace parbench

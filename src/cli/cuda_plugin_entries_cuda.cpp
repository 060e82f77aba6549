// The CUDA plugin's one C entry point (device/cuda_plugin.hpp): the table through which the
// core makes the plugin's devices, communicators, ops and background loads. It sits in cli/, the
// one layer that may name them all.
#include <memory>

#include "bench/gpu_background_load.hpp"
#include "comm/nccl_backend.hpp"
#include "device/cuda_plugin.hpp"
#include "device/gpu_inventory_cuda.hpp"
#include "train/ops/cuda_ops.hpp"

namespace parbench {
namespace {

std::unique_ptr<Ops> make_cuda_ops(const Device& device) { return std::make_unique<CudaOps>(device); }

constexpr CudaPluginEntries plugin_entries{cuda_plugin_interface_version, &cuda_gpu_availability,
                                           &query_cuda_gpu_inventory, &make_nccl_backend, &make_cuda_ops,
                                           &make_gpu_background_load};

}  // namespace
}  // namespace parbench

extern "C" const parbench::CudaPluginEntries* parbench_cuda_plugin_entries() { return &parbench::plugin_entries; }

// The CUDA backend (CudaDevice, the NCCL communicator, CudaOps, the GPU inventory) lives in
// a plugin, libparbench_cuda.so beside the parbench binary, opened with dlopen() the first
// time a run needs a GPU. A CPU run never maps the CUDA runtime, cuBLAS or NCCL: together
// they cost a process about 200 MiB of memory before it does anything. A binary that links
// the CUDA objects itself (the GPU tests, parbench-ops) uses them directly instead.
//
// The plugin and the core talk through the existing interfaces (Device, Communicator, Ops)
// and one C entry point, parbench_cuda_plugin_entries(), which returns a table of the few
// functions that make those objects. Both sides are built from the same sources by the same
// compiler, so the table's C++ types are shared as they are; interface_version catches a
// plugin left over from another build. No CUDA header here.
#pragma once

#include <memory>
#include <string>

#include "device/gpu_inventory.hpp"

namespace parbench {

// Made by the layers above device/ (comm/, bench/, train/): named here, defined there.
class BackgroundLoad;
class Communicator;
class Device;
class MpiSession;
class Ops;
struct BackgroundSpec;
struct NcclBackend;

// Raise whenever CudaPluginEntries changes.
inline constexpr int cuda_plugin_interface_version = 3;

// The GPUs this process can use, as a run choosing its backend needs to know them: how many,
// and, when there are none, whether that is an answer (no driver, no device, GPUs hidden by
// CUDA_VISIBLE_DEVICES) or a fault (the plugin or CUDA failed on a host whose NVIDIA driver is
// loaded), which a GPU run must report rather than quietly run on the CPU.
struct GpuAvailability {
    int count = 0;
    std::string fault;  // empty unless the host's GPUs exist but cannot be used; then why
};

struct CudaPluginEntries {
    int interface_version = 0;
    // cudaGetDeviceCount's answer; a CUDA error other than "no device" is a fault.
    GpuAvailability (*gpu_availability)() = nullptr;
    GpuInventory (*query_gpu_inventory)() = nullptr;
    NcclBackend (*make_nccl_backend)(const MpiSession& session, Communicator& bootstrap) = nullptr;
    std::unique_ptr<Ops> (*make_cuda_ops)(const Device& device) = nullptr;
    // --background on a GPU rank (bench/gpu_background_load.hpp).
    std::unique_ptr<BackgroundLoad> (*make_gpu_background_load)(const BackgroundSpec& spec, Device& device,
                                                                Communicator& data) = nullptr;
};

struct CudaPlugin {
    bool built = false;                          // this build made a plugin (PARBENCH_CUDA)
    const CudaPluginEntries* entries = nullptr;  // null when unavailable
    std::string unavailable_reason;              // why, when entries is null
    std::string origin;                          // the file it was loaded from, or "linked in"
};

// The plugin, loaded on the first call of the process (later calls return the same answer;
// it is never unloaded: the objects it made live until exit, and the CUDA runtime does not
// support being unloaded). Never throws: an absent or broken plugin is an answer.
const CudaPlugin& cuda_plugin();

// Whether this host has an NVIDIA kernel driver loaded (/proc/driver/nvidia/gpus lists a
// GPU, or /dev/nvidiactl exists), read without loading any CUDA library: without it no GPU
// can be visible, and a run choosing its backend need not load the plugin to learn that.
bool nvidia_driver_present();

// This process's GPUs: none, with no fault, without an NVIDIA driver (then nothing is loaded)
// or in a build without CUDA; with a driver, the plugin's answer, or its load failure as the
// fault.
GpuAvailability gpu_availability();

}  // namespace parbench

// The plugin's entry point (defined in src/device/cuda_plugin_entries_cuda.cpp).
extern "C" const parbench::CudaPluginEntries* parbench_cuda_plugin_entries();

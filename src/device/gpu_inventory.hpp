// What `parbench info` reports about the GPUs of one host: driver, runtime and NCCL
// versions, each GPU, and which pairs can reach each other's memory directly (P2P). No CUDA
// header here: the CPU-only build answers with `built_with_cuda = false`.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace parbench {

struct GpuDescription {
    int index = 0;  // CUDA ordinal, after CUDA_VISIBLE_DEVICES
    std::string name;
    std::size_t memory_bytes = 0;
    std::string pci_bus_id;  // "0000:18:00.0"
    std::string compute_capability;  // "9.0"
};

struct GpuInventory {
    bool built_with_cuda = false;
    // Why no GPU is listed (built without CUDA, no driver, no device); empty when some are.
    std::string unavailable_reason;
    std::string cuda_driver;   // "13.0"; empty when no driver answers
    std::string cuda_runtime;
    std::string nccl;
    std::vector<GpuDescription> gpus;
    // peer_access[a][b]: GPU a can access GPU b's memory directly (cudaDeviceCanAccessPeer).
    std::vector<std::vector<bool>> peer_access;
};

// Queries this host's GPUs. Never throws for a missing driver or device: that is reported.
GpuInventory query_gpu_inventory();

}  // namespace parbench

// The machine a plan is for: how many GPUs, how many share a host, and what one of them can
// do. Device presets carry vendor data-sheet peaks and capacities; the link figures are
// the bus bandwidths a well-tuned NCCL reaches (about 80% of the links' unidirectional
// rate), stated as assumptions and replaced by --calibrate.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace parbench {

struct LinkModel {
    double latency_us = 0.0;   // alpha of one collective call
    double busbw_gbps = 0.0;   // decimal GB/s of bus bandwidth (nccl-tests' convention)
    // Latency each step of a ring adds over this link ("ring_step_us"): a ring all-gather or
    // reduce-scatter over n ranks takes n - 1 steps, each waiting for its chunk from the previous
    // rank (NCCL's own cost model, src/graph/tuning.cc: latency = base + (steps - inter-host
    // steps) x NVLink hop + inter-host steps x network hop). 0: no per-step term.
    double ring_step_us = 0.0;
};

// NCCL's ring latencies per step for its Simple protocol, the one large transfers use
// (NVIDIA/nccl src/graph/tuning.cc, hwLat, Ring/Simple, as of commit 01afd20: NVLink 3.4 us,
// network 9.6 us). NCCL ran all-gather and reduce-scatter as rings only until its PAT algorithm
// (arXiv 2506.20252: "its linear latency would show poor performance ... at scale").
inline constexpr double nccl_ring_step_nvlink_us = 3.4;
inline constexpr double nccl_ring_step_network_us = 9.6;

struct DeviceSpec {
    std::string name;
    double peak_tflops_bf16 = 0.0;  // dense, per GPU
    double peak_tflops_fp32 = 0.0;
    double memory_gib = 0.0;
    double memory_bandwidth_gbps = 0.0;  // HBM, decimal GB/s (the optimizer's bound)
    LinkModel intra_host;  // NVLink inside a host
    LinkModel cross_host;  // the network, per GPU
    std::string source;
    bool preset = false;  // a GPU of device_preset_names(), not a --cluster file's own figures
    // The device preset whose GEMM curve and element-wise fraction this device computes with
    // (plan/device_compute.hpp): a preset names itself, a --cluster file's device names one
    // ("gemm_preset") or gives its own curve below; empty: neither, and plan refuses to guess.
    std::string gemm_preset{};
    double peak_tflops_fp8 = 0.0;  // dense, for plan --fp8; 0: no FP8 tensor cores (A100)
    // The compute model's numbers (plan/device_compute.hpp) when a --cluster file gives them
    // ("gemm_sustained", "gemm_overhead_us", "memory_fraction"); 0: gemm_preset's.
    double gemm_sustained = 0.0;
    double gemm_overhead_us = 0.0;
    double memory_fraction = 0.0;
    // The fused attention kernel the file's software runs, as fractions of the peak its forward
    // and backward reach ("flash_forward_fraction", "flash_backward_fraction"); 0: the preset's.
    double flash_forward_fraction = 0.0, flash_backward_fraction = 0.0;
    // HBM a framework's job cannot give its tensors ("memory_reserved_gib"): what PyTorch's
    // caching allocator holds reserved beyond the allocated tensors (fragmentation), the CUDA
    // context and NCCL's buffers. Layouts under --states zero|megatron fit in memory_gib less
    // this; parbench's own convention counts its engine's buffers and keeps the whole HBM.
    double memory_reserved_gib = 0.0;
};

// The GPU presets' memory_reserved_gib: GMLake (Guo et al., ASPLOS'24, arXiv 2401.08156, abstract)
// trained eight LLMs on A100-80GB with recomputation, offloading, distributed training or LoRA
// and found PyTorch's caching allocator reserving on average 9.2 GB (up to 25 GB) more than the
// same runs needed without its fragmentation (15 % fragmentation on average, up to 33 %): memory a job cannot give
// its tensors. The CUDA context and NCCL's per-communicator buffers come on top and are not
// counted (no cited figure for them), so this is a floor. Measured on A100; the other presets
// assume the same.
inline constexpr double framework_memory_reserve_gib = 9.2e9 / (1024.0 * 1024.0 * 1024.0);

struct ClusterSpec {
    DeviceSpec device;
    int gpus = 1;
    int gpus_per_host = 8;  // ranks per host
    // CPU cores that serve a host's ranks (--cores-per-host, "cores_per_host", or the compute
    // calibration report's host); 0: unknown, every rank has a core (or a GPU) of its own.
    int cores_per_host = 0;
    std::string cores_source;
    std::string source;  // "preset H100" or the --cluster file
};

// The share of one core (or device) that each rank of a host computes with: 1, or
// cores / ranks when the ranks on a host outnumber its cores (an oversubscribed CPU run, where
// the scheduler time-slices the cores among the ranks). `world` ranks in all, at most
// gpus_per_host of them on one host.
struct ComputeShare {
    int ranks_per_host = 1;
    int cores_per_host = 0;
    double share = 1.0;
    bool oversubscribed() const { return share < 1.0; }
};
ComputeShare compute_share(const ClusterSpec& cluster, int world);

std::vector<std::string> device_preset_names();
// UsageError naming --device for an unknown name.
DeviceSpec device_preset(const std::string& name);
// The ranges a cluster's figures must lie in, wherever they come from (--cluster files, flags):
// far beyond any machine built, and small enough that every product plan forms stays exact.
namespace cluster_limits {
inline constexpr std::int64_t max_gpus = 1 << 20;
inline constexpr std::int64_t max_gpus_per_host = 1024;
inline constexpr std::int64_t max_cores_per_host = 1 << 16;
inline constexpr double max_tflops = 1e6;      // per device
inline constexpr double max_memory_gib = 1e6;  // per device
inline constexpr double max_gbps = 1e7;        // HBM or link bandwidth, decimal GB/s
inline constexpr double max_latency_us = 1e7;
}  // namespace cluster_limits

// A JSON cluster description (schemas/cluster.schema.json): {"device": "H100" | {...DeviceSpec
// fields}, "gpus", "gpus_per_host", "cores_per_host", "description", "sources"}. `source` names
// the document in messages ("--cluster c.json"); UsageError naming it and the key for anything
// malformed, out of range or unknown.
ClusterSpec parse_cluster(const nlohmann::json& document, const std::string& source);
ClusterSpec read_cluster_file(const std::string& path);
nlohmann::json to_json(const ClusterSpec& cluster);

}  // namespace parbench

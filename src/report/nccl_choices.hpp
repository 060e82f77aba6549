// What NCCL chose, read from its own debug log (NCCL_DEBUG=INFO, written to NCCL_DEBUG_FILE):
// the lines NCCL prints at initialisation and, with the TUNING subsystem, once per collective
// call on rank 0. The forms read (NCCL's documented environment variables and the lines its
// sources print; the prefix "host:pid:tid [dev] NCCL INFO " is optional):
//
//   NCCL version 2.21.5+cuda12.4                              the library
//   NCCL_IB_HCA set by environment to mlx5_0                  every parameter taken from the environment
//   Using network IB | Using network Socket                   the network plugin of the cross-host level
//   NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ...    its devices
//   Channel 00/0 : 0[0] -> 1[1] via P2P/IPC                   the transport of one connection
//       (P2P/..., SHM/... inside a host; NET/<network>/... across hosts)
//   NVLS multicast support is available on dev 0             NVLink SHARP present (or "is not available")
//   AllReduce: 8388608 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..15}   (NCCL >= 2.23)
//   AllGather: 37756928 Bytes -> Algo 1 proto 2 time 2860.2  (older: algorithm and protocol by number)
//
// A fallback (the cross-host level on TCP sockets where the host has RDMA devices, a large
// all-reduce on Ring where NVLS is available, intra-host traffic through host memory where GPUs
// could reach each other directly) is a warning that names the fix.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace parbench {

// One collective call as NCCL's tuner decided it.
struct NcclChoice {
    std::string collective;  // parbench's name ("allreduce"), "" when the line does not say (old NCCL)
    std::uint64_t bytes = 0;  // NCCL's nBytes (the per-rank buffer; allgather's send count x type)
    std::string algorithm;    // "RING", "TREE", "NVLS", "NVLS_TREE", "COLLNET_DIRECT", "COLLNET_CHAIN", "PAT"
    std::string protocol;     // "LL", "LL128", "SIMPLE"
    std::optional<int> channels;  // Hi - Lo + 1 of channel{Lo..Hi}, when printed
};

struct NcclLogFacts {
    std::string version;
    std::string network;                         // "IB", "Socket", "AWS Libfabric", ...
    std::vector<std::string> network_devices;    // "mlx5_0:1/IB", "eth0:10.0.0.1<0>"
    std::optional<bool> nvls_available;
    std::map<std::string, std::string> set_by_environment;  // NCCL_X -> value, as NCCL read them
    std::map<std::string, int> intra_host_transports;      // "P2P/IPC" -> connections
    std::map<std::string, int> cross_host_transports;      // "NET/IB" -> connections
    std::vector<NcclChoice> choices;                       // in log order
};

NcclLogFacts parse_nccl_log(const std::string& text);
// Adds what `more` holds to `facts` (a log read in pieces): choices appended, maps merged.
void merge_nccl_facts(NcclLogFacts& facts, const NcclLogFacts& more);

// The choice NCCL made for the calls of one point: the last line of `collective` (the calls
// of a point follow each other, so the point's own lines are the last ones read); nullopt when
// there is none.
std::optional<NcclChoice> choice_for(const std::vector<NcclChoice>& choices, const std::string& collective);

// The RDMA devices of a host: /sys/class/infiniband entries with their kernel driver
// ("mlx5_0 (mlx5_core)", "rdmap16s27 (efa)").
struct HostNetwork {
    std::vector<std::string> rdma_devices;
    bool has_efa = false;  // a device whose driver is efa (AWS)
};
// Reads `folder` (the sysfs class of RDMA devices); nothing when it does not exist. Never throws.
HostNetwork read_host_network(const std::string& folder = "/sys/class/infiniband");

struct NcclWarning {
    std::string kind;  // "sockets", "nvls", "shm"
    std::string text;  // what happened and the fix
};
// Warnings from a log's facts and the host's devices. The NVLS one needs the per-call lines
// (--nccl-choices): an all-reduce of nvls_expected_from_bytes or more that did not run on NVLS
// (or NVLS_TREE) while NVLS was available. 64 MiB is well above where NCCL's tuner moves a
// Hopper node's all-reduce from Ring/LL128 to NVLS (logs of 8 MiB on Ring, 256 MiB on NVLS), so a
// Ring there is a setting (NCCL_ALGO, NCCL_NVLS_ENABLE) or a missing fabric manager, not a tuning.
inline constexpr std::uint64_t nvls_expected_from_bytes = std::uint64_t{64} << 20;
std::vector<NcclWarning> nccl_fallback_warnings(const NcclLogFacts& facts, const HostNetwork& host);

}  // namespace parbench

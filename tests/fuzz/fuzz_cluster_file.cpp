// Fuzz target: the --cluster file of `parbench plan` (its text). Any text either gives a cluster
// whose figures are finite and in cluster_limits' ranges, or is refused with one UsageError
// (never a raw JSON exception, a crash or a wrapped integer).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "plan/cluster.hpp"
#include "core/json_file.hpp"

namespace {

bool within(double value, double max) { return std::isfinite(value) && value > 0 && value <= max; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace parbench;
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const ClusterSpec cluster = parse_cluster(parse_json_text(text, "fuzz.json"), "--cluster fuzz.json");
        const DeviceSpec& d = cluster.device;
        if (cluster.gpus < 1 || cluster.gpus > cluster_limits::max_gpus || cluster.gpus_per_host < 1 ||
            cluster.gpus_per_host > cluster_limits::max_gpus_per_host || cluster.cores_per_host < 0 ||
            !within(d.peak_tflops_bf16, cluster_limits::max_tflops) || !within(d.peak_tflops_fp32, cluster_limits::max_tflops) ||
            !within(d.memory_gib, cluster_limits::max_memory_gib) ||
            !within(d.memory_bandwidth_gbps, cluster_limits::max_gbps) ||
            !within(d.intra_host.busbw_gbps, cluster_limits::max_gbps) ||
            !within(d.cross_host.busbw_gbps, cluster_limits::max_gbps) || !(d.intra_host.latency_us >= 0) ||
            !(d.cross_host.latency_us >= 0))
            __builtin_trap();
        (void)to_json(cluster).dump();
    } catch (const UsageError&) {
    }
    return 0;
}

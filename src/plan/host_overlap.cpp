#include "plan/host_overlap.hpp"

#include <algorithm>

namespace parbench {

bool is_cpu_host(const ClusterSpec& cluster) {
    return cluster.cores_per_host > 0 && !cluster.device.preset && cluster.device.gemm_preset.empty();
}

HostOverlap host_overlap(const ClusterSpec& cluster, const ComputeShare& share) {
    HostOverlap overlap;
    if (!is_cpu_host(cluster) || share.ranks_per_host < cluster.cores_per_host) return overlap;
    overlap.hides_nothing = true;
    overlap.reason = std::to_string(share.ranks_per_host) + " ranks on " + std::to_string(cluster.cores_per_host) +
                     " CPU cores: MPI copies, reduces and progresses non-blocking collectives on the ranks' own "
                     "cores, inside their MPI calls, so every collective is exposed";
    return overlap;
}

double nonblocking_calls(const Layout& layout, const std::string& collective, double calls) {
    if (collective == "allreduce" && layout.zero == 0 && layout.overlap) return calls;
    if (collective == "reducescatter" && layout.zero > 0 && layout.overlap) return calls;
    if (collective == "allgather" && layout.zero == 3 && layout.prefetch)
        return std::max(0.0, calls - layout.microbatches);
    return 0.0;
}

}  // namespace parbench

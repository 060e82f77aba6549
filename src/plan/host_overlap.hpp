// Whether communication can hide behind compute at all on the host a plan is for. On a CPU host
// whose ranks take every core (ranks per host >= cores), nothing is left to move the bytes while
// the ranks compute: Open MPI's shared-memory transport (btl/vader) copies each message, and its
// reductions add, on the calling rank's own core, and a non-blocking collective (coll/libnbc)
// advances only inside an MPI call of that rank (Open MPI FAQ "progress": no asynchronous progress
// thread by default; MPI 4.0 sec. 2.9 leaves progress outside MPI calls to the implementation).
// parbench's CPU engine overlaps that way: it issues MPI_Iallreduce / MPI_Ireduce_scatter per
// bucket and polls them with MPI_Test between the backward's units (train/schemes/data_parallel.cpp,
// zero.cpp), so the transfer runs in the polls and the final wait, not beside the GEMMs. Such a host
// prices every collective as exposed: an overlap flag hides nothing there (and takes nothing from
// the compute beside it). A GPU (its copy engines and NCCL's kernels progress on their own) or a
// CPU host with a core to spare overlaps as the schemes model it.
#pragma once

#include <string>

#include "plan/cluster.hpp"

namespace parbench {

// A CPU host: the cluster names its cores per host and its device is no GPU (neither a GPU preset
// nor a --cluster device computing on a GPU preset's curve).
bool is_cpu_host(const ClusterSpec& cluster);

struct HostOverlap {
    bool hides_nothing = false;
    std::string reason;  // why, for the plan's output; empty when the schemes' overlap holds
};
HostOverlap host_overlap(const ClusterSpec& cluster, const ComputeShare& share);

}  // namespace parbench

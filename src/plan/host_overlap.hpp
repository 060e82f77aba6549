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
#include "theory/layout.hpp"

namespace parbench {

// A CPU host: the cluster names its cores per host and its device is no GPU (neither a GPU preset
// nor a --cluster device computing on a GPU preset's curve).
bool is_cpu_host(const ClusterSpec& cluster);

struct HostOverlap {
    bool hides_nothing = false;
    std::string reason;  // why, for the plan's output; empty when the schemes' overlap holds
};
HostOverlap host_overlap(const ClusterSpec& cluster, const ComputeShare& share);

// How many of a step's `calls` of a data-parallel `collective` parbench's CPU engine issues as
// non-blocking requests under the layout's flags (train/schemes/data_parallel.cpp, zero.cpp):
// under --overlap, ZeRO-0's bucket all-reduces (MPI_Iallreduce) and ZeRO's gradient
// reduce-scatters (MPI_Ireduce_scatter_block), all of them; under ZeRO-3's --prefetch, the
// parameter all-gathers (MPI_Iallgather) but the first of each micro-batch, which its first
// acquire gathers blocking before each acquire prefetches the next unit. 0 otherwise.
// Where nothing hides, such a request costs what its MPI_I* form and wait take back to back
// (Open MPI's libnbc schedule, progressed in the polls and the wait), which plan prices from a
// --nonblocking sweep when the calibration holds one (plan/alpha_beta.hpp); elsewhere it hides
// behind compute as the schemes model it.
double nonblocking_calls(const Layout& layout, const std::string& collective, double calls);

}  // namespace parbench

// What one collective call should take on a given machine: the expected time of a collective,
// size, group and placement, from the links it crosses and the algorithm a good library picks
// at that size, and the bus bandwidth that time gives (nccl-tests' convention, so a measured
// point's busbw divides by it into a ratio). Two machines are described:
//
// A GPU cluster (--cluster FILE or a preset, plan/cluster.hpp): NCCL's own tuning model,
// src/graph/tuning.cc at commit 01afd20 (the commit cluster.hpp's ring latencies come from).
// For every algorithm (Ring for all collectives; Tree for all-reduce) and protocol (LL, LL128,
// Simple) the time is latency + bytes / bandwidth, and NCCL runs the one whose time is least:
//   latency   = baseLat[algo][proto] + hops x hwLat[level][algo][proto] (Ring: (nsteps - inter
//               steps) NVLink hops + inter steps network hops; Tree: 2 ((ranks per host - 1)
//               NVLink hops + log2 hosts network hops)); the cluster's ring_step_us replaces
//               Ring/Simple's per-hop figure where it gives one
//   bandwidth = the link's bus bandwidth (the slower level the traffic crosses) x NCCL's protocol
//               factor (Ring LL 1/4 across hosts or for all-reduce and reduce, else 1/3; LL128
//               0.92; Tree 0.9, its LL a further 1/3.8, its LL128 7/9 in one host, else 0.915),
//               and a Tree moves 2 S per rank where a ring moves 2 S (n-1)/n.
// NCCL's size-dependent tree correction, its ring plateau factor and its per-GPU caps are left
// out, and LL128 is taken to be enabled (NCCL enables it on NVLink-connected Volta, Ampere and
// Hopper GPUs). Collectives NCCL runs as grouped send/recv (alltoall, alltoallv, gather,
// scatter, sendrecv) have no tuner: one Simple hop of latency and the link's bandwidth.
//
// One CPU host, ranks exchanging through shared memory (the MPI backend): what parbench measures
// of the host itself (bench/host_links.hpp), every rank at once: the latency of a step (a ring
// exchange of 8 bytes back to back, and the first step of a call as the harness times it, after
// its barrier), and at the working set of the point the bandwidth of the transport (a ring
// exchange of half the working set), of a local reduction (y += x) and of memcpy, the bound a
// shared-memory transport cannot pass (a single-copy one, vader with CMA, reaches about half of it
// here). A byte moved between ranks costs 1 / exchange and a reduced one 1 / exchange + 1 / reduce.
// The algorithms are the textbook ones MPI libraries
// choose between by size (Thakur, Rabenseifner and Gropp, "Optimization of Collective
// Communication Operations in MPICH", IJHPCA 2005): ring, recursive doubling and halving,
// Rabenseifner's reduce-scatter + all-gather, binomial trees, van de Geijn's scatter +
// all-gather broadcast, pairwise exchange; the expected time is the least of them, the time a
// well-chosen algorithm reaches.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "plan/cluster.hpp"

namespace parbench {

// The ranks of one collective call and where they sit.
struct GroupShape {
    int ranks = 1;
    int hosts = 1;
    int ranks_per_host = 1;  // the most on one host
};

// One working-set size of the host measurement: bandwidths per rank while every rank of the
// host runs the same loop, in decimal GB/s.
struct HostBandwidth {
    std::uint64_t working_set_bytes = 0;  // source + destination of each rank
    double copy_gbps = 0.0;                // bytes memcpy copies per second
    double reduce_gbps = 0.0;              // bytes of y in y += x per second
    double exchange_gbps = 0.0;            // bytes each rank receives per second in a ring exchange
};

// What parbench measured of the host it runs on (bench/host_links.hpp).
struct HostLinks {
    double step_latency_us = 0.0;  // one ring step of 8 bytes, every rank exchanging at once, back to back
    double call_latency_us = 0.0;  // the same step timed alone after a barrier, the slowest rank's (median)
    std::vector<HostBandwidth> bandwidths;  // ascending working set
    int ranks = 0;                          // ranks that ran the measurement at once
    std::string cpu;
    // The bandwidths at a working set, log-linear between the sizes measured and the nearest
    // one beyond them.
    HostBandwidth at(std::uint64_t working_set_bytes) const;
};
nlohmann::json to_json(const HostLinks& links);

struct Expectation {
    double time_us = 0.0;
    double latency_us = 0.0;    // the time's latency term
    double bandwidth_us = 0.0;  // and its bandwidth term
    double busbw_gbps = 0.0;    // bytes x bus factor / time: what a measured busbw is set against
    std::string algorithm;      // "ring", "tree", "recursive doubling", ...
    std::string protocol;       // NCCL's "LL", "LL128", "Simple"; "" on a host
    std::string level;          // "intra-host" or "cross-host": the links the traffic crosses
    std::string bound;          // "latency" or "bandwidth": the larger term
    std::string source;         // where the links' figures come from
};
nlohmann::json to_json(const Expectation& expectation);

// `collective` is parbench's name, `bytes` nccl-tests' size; a group of one expects nothing
// (time 0). `traffic_scale` multiplies the bandwidth term: the busiest rank's share of a skewed
// alltoallv against the even one (1 otherwise).
Expectation expected_on_cluster(const std::string& collective, double bytes, const GroupShape& group,
                                const ClusterSpec& cluster, double traffic_scale = 1.0);
// `working_set_bytes`: each rank's send + receive buffers at this point; `per_iteration`: the
// harness times each call after a barrier (its first step then costs call_latency_us), not a
// batch of calls back to back.
Expectation expected_on_host(const std::string& collective, double bytes, int ranks, double working_set_bytes,
                             const HostLinks& links, bool per_iteration, double traffic_scale = 1.0);

}  // namespace parbench

// NCCL Inspector's in-job records (NVIDIA/nccl ext-profiler/inspector, README "Output Example",
// output format v4.0): a profiler plugin that writes, for every collective of every
// communicator, one JSON object per rank and per operation, one object per line:
//
//   {"header": {"id": "0x7f8c...", "rank": 2, "n_ranks": 8, "nnodes": 1},
//    "metadata": {"inspector_output_format_version": "v4.0", "hostname": "...", "pid": ..., ...},
//    "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
//                  "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
//                  "coll_algobw_gbs": 277.2, "coll_busbw_gbs": 485.1}}
//
// Its message size is nccl-tests' for AllReduce, Broadcast, Reduce and SendRecv, but one rank's
// share for AllGather and ReduceScatter (its bandwidths multiply that size by n_ranks: the
// plugin's inspectorComputeCollBw), so a record's size in parbench's convention (the full
// buffer, collectives/collective.hpp) is coll_msg_size_bytes x n_ranks for those two.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parbench {

struct InspectorRecord {
    std::string collective;         // parbench's name: "allreduce", "allgather", ..., "sendrecv"
    std::string nccl_name;          // as written: "AllReduce"
    std::uint64_t bytes = 0;        // in parbench's (nccl-tests') size convention
    std::uint64_t message_bytes = 0;  // coll_msg_size_bytes as written
    double exec_time_us = 0.0;
    double algbw_gbps = 0.0;
    double busbw_gbps = 0.0;
    std::string timing_source;  // "kernel_gpu", "kernel_cpu", "collective_cpu" or "" (older output)
    std::string communicator;   // header.id
    std::uint64_t sequence = 0;  // coll_sn: the operation's number on its communicator
    int rank = 0;
    int n_ranks = 0;
    int nnodes = 0;
    std::string host;
};

// Whether `text` (a file's contents) is an Inspector log: its first non-blank line is a JSON
// object holding "coll_perf". Never throws.
bool looks_like_inspector_log(const std::string& text);

// Every record of an Inspector log. `name` names the file in messages. A line that is not JSON,
// or a record missing a key or holding one out of range, is a UsageError naming the file, the
// line and the key; blank lines are skipped. Records of a collective parbench has no unit for
// (NCCL's Send and Recv halves) are kept out, since no benchmark point matches them.
std::vector<InspectorRecord> parse_inspector_log(const std::string& text, const std::string& name);

}  // namespace parbench

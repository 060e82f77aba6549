// Where a run happened, as every report records it: enough to tell two clusters apart and
// to judge whether a number can be trusted (oversubscribed hosts, library versions).
// Plain data: the command gathers it over the job (cli/job_environment.hpp).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "device/device.hpp"

namespace parbench {

// Which pages the run's host buffers were on (device/host_pages.hpp): asked for, the kernel's
// setting, and a probe allocated as the buffers are, read back from /proc/self/smaps on every rank.
struct BufferPagesRecord {
    std::string requested;                            // "normal" or "huge"; "" where buffers are GPU memory
    std::vector<std::string> thp_enabled_by_rank;     // always, madvise, never, unavailable
    std::vector<std::string> thp_defrag_by_rank;
    std::uint64_t probe_bytes = 0;
    std::vector<std::uint64_t> probe_huge_capacity_by_rank;  // bytes whole huge pages could back
    std::vector<std::optional<std::uint64_t>> probe_huge_bytes_by_rank;  // nullopt: smaps unreadable
};

// What the buffers got: "normal" (no rank's probe on a huge page), "huge" (every rank's on huge
// pages wherever they fit), "partly huge", "device memory" (a GPU's: no page policy applies), or
// "unknown" (a rank could not read /proc/self/smaps). compare tells reports apart by it.
std::string obtained_pages(const BufferPagesRecord& record);
// The record of one process's read-back (parbench-ops, which runs without MPI).
BufferPagesRecord buffer_pages_record(const PageReadBack& read_back);
nlohmann::json to_json(const BufferPagesRecord& record);
// The console headers' line from a report's environment.buffer_pages: "# buffer pages: normal
// asked (...); THP madvise; obtained: normal (...)"; "" for a report that has none.
std::string buffer_pages_line(const nlohmann::json& record);

struct Environment {
    int world_size = 1;
    std::string launcher;                     // what started the job: mpirun, srun, mpiexec (hydra), none
    std::vector<std::string> hosts_by_rank;   // per rank
    std::vector<std::string> hosts;           // distinct, in order of first rank
    std::map<std::string, int> ranks_per_host;
    std::string backend;                      // "mpi" or "nccl"
    std::string device_kind;                  // "cpu" or "cuda"
    std::vector<std::string> devices;         // per rank
    std::string mpi_version;
    std::string cpu;
    unsigned cpu_cores = 0;                   // of this host
    // What the CPU ops computed with (device/cpu_kernels.hpp), rank 0's: their path, whether
    // PARBENCH_CPU_KERNELS forced it, the paths this CPU runs; OpenBLAS's build and kernels.
    std::string cpu_kernels;
    bool cpu_kernels_forced = false;
    std::vector<std::string> cpu_kernels_runnable;
    std::string blas;
    std::string blas_core;
    std::map<std::string, std::string> versions;  // from the device: CUDA, NCCL
    BufferPagesRecord buffer_pages;
};

// Fills hosts and ranks_per_host from hosts_by_rank.
void count_ranks_per_host(Environment& environment);
nlohmann::json to_json(const Environment& environment);
// buffer_pages_line of its record.
std::string buffer_pages_line(const Environment& environment);
// True when some host runs more ranks than it has cores: timings then measure the
// scheduler as much as the code.
bool oversubscribed(const Environment& environment);

}  // namespace parbench

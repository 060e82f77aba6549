// Where a run happened, as every report records it: enough to tell two clusters apart and
// to judge whether a number can be trusted (oversubscribed hosts, library versions).
// Plain data: the command gathers it over the job (cli/job_environment.hpp).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace parbench {

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
};

// Fills hosts and ranks_per_host from hosts_by_rank.
void count_ranks_per_host(Environment& environment);
nlohmann::json to_json(const Environment& environment);
// True when some host runs more ranks than it has cores: timings then measure the
// scheduler as much as the code.
bool oversubscribed(const Environment& environment);

}  // namespace parbench

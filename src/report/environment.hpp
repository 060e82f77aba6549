// Where a run happened, as every report records it: enough to tell two clusters apart and
// to judge whether a number can be trusted (oversubscribed hosts, library versions).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/mpi_session.hpp"
#include "device/device.hpp"

namespace parbench {

struct Environment {
    int world_size = 1;
    std::vector<std::string> hosts;           // distinct, in order of first rank
    std::map<std::string, int> ranks_per_host;
    std::string backend;                      // "mpi" or "nccl"
    std::string device_kind;                  // "cpu" or "cuda"
    std::vector<std::string> devices;         // per rank
    std::string mpi_version;
    std::string cpu;
    unsigned cpu_cores = 0;                   // of this host
    std::map<std::string, std::string> versions;  // from the device: CUDA, NCCL
};

// Collective over `control`: gathers every rank's device name.
Environment collect_environment(const MpiSession& session, const Device& device, const Communicator& data,
                                Communicator& control);
nlohmann::json to_json(const Environment& environment);
// True when some host runs more ranks than it has cores: timings then measure the
// scheduler as much as the code.
bool oversubscribed(const Environment& environment);

}  // namespace parbench

#include "report/environment.hpp"

#include <algorithm>

namespace parbench {

void count_ranks_per_host(Environment& environment) {
    environment.hosts.clear();
    environment.ranks_per_host.clear();
    for (const std::string& host : environment.hosts_by_rank) {
        if (std::find(environment.hosts.begin(), environment.hosts.end(), host) == environment.hosts.end())
            environment.hosts.push_back(host);
        ++environment.ranks_per_host[host];
    }
}

nlohmann::json to_json(const Environment& environment) {
    nlohmann::json ranks_per_host = nlohmann::json::object();
    for (const auto& [host, ranks] : environment.ranks_per_host) ranks_per_host[host] = ranks;
    return {
        {"world_size", environment.world_size},
        {"launcher", environment.launcher},
        {"hosts", environment.hosts},
        {"ranks_per_host", ranks_per_host},
        {"hosts_by_rank", environment.hosts_by_rank},
        {"backend", environment.backend},
        {"device_kind", environment.device_kind},
        {"device", environment.devices.empty() ? std::string() : environment.devices.front()},
        {"devices", environment.devices},
        {"mpi_version", environment.mpi_version},
        {"cpu", environment.cpu},
        {"cpu_cores", environment.cpu_cores},
        {"cpu_kernels",
         {{"path", environment.cpu_kernels},
          {"forced", environment.cpu_kernels_forced},
          {"runnable", environment.cpu_kernels_runnable}}},
        {"blas", {{"library", environment.blas}, {"core", environment.blas_core}}},
        {"versions", environment.versions},
    };
}

bool oversubscribed(const Environment& environment) {
    if (environment.device_kind != "cpu") return false;
    return std::any_of(environment.ranks_per_host.begin(), environment.ranks_per_host.end(), [&](const auto& entry) {
        return environment.cpu_cores > 0 && static_cast<unsigned>(entry.second) > environment.cpu_cores;
    });
}

}  // namespace parbench

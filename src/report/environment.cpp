#include "report/environment.hpp"

#include <algorithm>
#include <thread>

#include "device/cpu_device.hpp"

namespace parbench {
namespace {

constexpr std::size_t device_name_bytes = 128;

std::vector<std::string> gather_device_names(const Device& device, Communicator& control) {
    std::string name = device.name();
    name.resize(device_name_bytes, '\0');
    std::vector<char> all(device_name_bytes * static_cast<std::size_t>(control.size()));
    control.allgather(name.data(), all.data(), device_name_bytes, DType::uint8);
    std::vector<std::string> names;
    for (int r = 0; r < control.size(); ++r) names.emplace_back(all.data() + device_name_bytes * static_cast<std::size_t>(r));
    return names;
}

}  // namespace

Environment collect_environment(const MpiSession& session, const Device& device, const Communicator& data,
                                Communicator& control) {
    Environment environment;
    environment.world_size = session.world_size();
    for (const std::string& host : session.hosts_by_rank()) {
        if (std::find(environment.hosts.begin(), environment.hosts.end(), host) == environment.hosts.end())
            environment.hosts.push_back(host);
        ++environment.ranks_per_host[host];
    }
    environment.backend = data.backend();
    environment.device_kind = device.kind();
    environment.devices = gather_device_names(device, control);
    environment.mpi_version = session.library_version();
    environment.cpu = cpu_model_name();
    environment.cpu_cores = std::thread::hardware_concurrency();
    environment.versions = device.versions();
    return environment;
}

nlohmann::json to_json(const Environment& environment) {
    nlohmann::json ranks_per_host = nlohmann::json::object();
    for (const auto& [host, ranks] : environment.ranks_per_host) ranks_per_host[host] = ranks;
    return {
        {"world_size", environment.world_size},
        {"hosts", environment.hosts},
        {"ranks_per_host", ranks_per_host},
        {"backend", environment.backend},
        {"device_kind", environment.device_kind},
        {"device", environment.devices.empty() ? std::string() : environment.devices.front()},
        {"devices", environment.devices},
        {"mpi_version", environment.mpi_version},
        {"cpu", environment.cpu},
        {"cpu_cores", environment.cpu_cores},
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

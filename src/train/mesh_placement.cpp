#include "train/mesh_placement.hpp"

#include <algorithm>
#include <sstream>

namespace parbench {
namespace {

std::vector<std::string> distinct_hosts(const std::vector<int>& ranks, const std::vector<std::string>& hosts_by_rank) {
    std::vector<std::string> hosts;
    for (int rank : ranks) {
        const std::string& host = hosts_by_rank.at(static_cast<std::size_t>(rank));
        if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
    }
    return hosts;
}

}  // namespace

MeshPlacement place_mesh(const MeshShape& shape, const std::vector<std::string>& hosts_by_rank) {
    MeshPlacement placement;
    const std::pair<const char*, MeshDimension> dimensions[] = {
        {"dp", MeshDimension::dp}, {"tp", MeshDimension::tp}, {"pp", MeshDimension::pp}, {"cp", MeshDimension::cp}};
    for (const auto& [name, dimension] : dimensions)
        for (const std::vector<int>& group : mesh_all_groups(shape, dimension))
            placement.group_hosts[name].push_back(distinct_hosts(group, hosts_by_rank));

    const auto& tp_hosts = placement.group_hosts["tp"];
    const auto spanning = std::find_if(tp_hosts.begin(), tp_hosts.end(), [](const auto& hosts) { return hosts.size() > 1; });
    placement.tp_crosses_hosts = spanning != tp_hosts.end();
    if (!placement.tp_crosses_hosts) return placement;

    std::map<std::string, int> ranks_per_host;
    for (const std::string& host : hosts_by_rank) ++ranks_per_host[host];
    const bool could_fit = std::all_of(ranks_per_host.begin(), ranks_per_host.end(),
                                       [&](const auto& entry) { return entry.second % shape.tp == 0; });
    const auto group = mesh_all_groups(shape, MeshDimension::tp)[static_cast<std::size_t>(spanning - tp_hosts.begin())];
    std::ostringstream text;
    text << "tp group of ranks";
    for (int rank : group) text << ' ' << rank;
    text << " spans hosts";
    for (const std::string& host : *spanning) text << ' ' << host;
    text << ": every tensor-parallel all-reduce crosses the network; ";
    if (could_fit)
        text << "launch ranks packed by host (mpirun --map-by slot or ppr:K:node, srun --distribution=block) so "
                "each tp group's consecutive ranks share a host";
    else
        text << "--tp " << shape.tp << " does not divide the ranks of every host; use a --tp that does";
    placement.warning = text.str();
    return placement;
}

}  // namespace parbench

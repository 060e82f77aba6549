// Where the mesh's groups land on hosts. The mesh puts tensor parallelism innermost
// (consecutive ranks), so with ranks packed by host (mpirun's default --map-by slot,
// ppr:K:node, Slurm's block distribution) every tp group of size <= ranks per host stays
// inside one host, on its fast links, and data parallelism crosses hosts. Launched round
// robin (--map-by node, cyclic) the same layout still trains correctly, but every tp
// all-reduce crosses the network: that placement is reported (tp_crosses_hosts) and warned
// about, never refused, since measuring it is a legitimate experiment.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "train/mesh.hpp"

namespace parbench {

struct MeshPlacement {
    // Per dimension ("dp", "tp", "pp", "cp"): each group's distinct hosts, in group-rank order.
    std::map<std::string, std::vector<std::vector<std::string>>> group_hosts;
    bool tp_crosses_hosts = false;
    std::optional<std::string> warning;  // with the fix, when tp crosses hosts
};

MeshPlacement place_mesh(const MeshShape& shape, const std::vector<std::string>& hosts_by_rank);

}  // namespace parbench

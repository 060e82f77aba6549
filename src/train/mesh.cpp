#include "train/mesh.hpp"

#include <stdexcept>
#include <string>

#include "theory/expert_parallel.hpp"

namespace parbench {
namespace {

// The coordinates that move along a dimension (two for the combined dp_cp group).
std::vector<int MeshCoordinates::*> moving(MeshDimension dimension) {
    switch (dimension) {
        case MeshDimension::dp: return {&MeshCoordinates::dp};
        case MeshDimension::tp: return {&MeshCoordinates::tp};
        case MeshDimension::pp: return {&MeshCoordinates::pp};
        case MeshDimension::cp: return {&MeshCoordinates::cp};
        case MeshDimension::dp_cp: return {&MeshCoordinates::dp, &MeshCoordinates::cp};
    }
    return {};
}

int extent(const MeshShape& shape, int MeshCoordinates::*coordinate) {
    if (coordinate == &MeshCoordinates::dp) return shape.dp;
    if (coordinate == &MeshCoordinates::tp) return shape.tp;
    if (coordinate == &MeshCoordinates::pp) return shape.pp;
    return shape.cp;
}

// A group is identified by the coordinates that do not move along it: the world rank of its
// member whose moving coordinates are 0. The key is the group rank (the moving coordinates,
// the first one major).
int group_color(const MeshShape& shape, MeshDimension dimension, MeshCoordinates at) {
    for (int MeshCoordinates::*coordinate : moving(dimension)) at.*coordinate = 0;
    return mesh_rank(shape, at);
}

int group_rank(const MeshShape& shape, MeshDimension dimension, const MeshCoordinates& at) {
    int rank = 0;
    for (int MeshCoordinates::*coordinate : moving(dimension)) rank = rank * extent(shape, coordinate) + at.*coordinate;
    return rank;
}

int group_size(const MeshShape& shape, MeshDimension dimension) {
    int size = 1;
    for (int MeshCoordinates::*coordinate : moving(dimension)) size *= extent(shape, coordinate);
    return size;
}

// The coordinates of group rank `index` in the group of `origin` along `dimension`.
MeshCoordinates group_member(const MeshShape& shape, MeshDimension dimension, MeshCoordinates origin, int index) {
    const auto coordinates = moving(dimension);
    for (auto c = coordinates.rbegin(); c != coordinates.rend(); ++c) {
        const int size = extent(shape, *c);
        origin.**c = index % size;
        index /= size;
    }
    return origin;
}

}  // namespace

MeshShape mesh_shape(const Layout& layout) { return MeshShape{layout.dp, layout.tp, layout.pp, layout.cp}; }

MeshCoordinates mesh_coordinates(const MeshShape& shape, int world_rank) {
    if (world_rank < 0 || world_rank >= shape.world())
        throw std::out_of_range("mesh_coordinates: rank " + std::to_string(world_rank) + " outside the mesh");
    MeshCoordinates at;
    at.tp = world_rank % shape.tp;
    at.cp = (world_rank / shape.tp) % shape.cp;
    at.dp = (world_rank / (shape.tp * shape.cp)) % shape.dp;
    at.pp = world_rank / (shape.tp * shape.cp * shape.dp);
    return at;
}

int mesh_rank(const MeshShape& shape, const MeshCoordinates& at) {
    return ((at.pp * shape.dp + at.dp) * shape.cp + at.cp) * shape.tp + at.tp;
}

std::vector<int> mesh_group_ranks(const MeshShape& shape, MeshDimension dimension, int world_rank) {
    const MeshCoordinates origin = mesh_coordinates(shape, world_rank);
    std::vector<int> ranks;
    for (int index = 0; index < group_size(shape, dimension); ++index)
        ranks.push_back(mesh_rank(shape, group_member(shape, dimension, origin, index)));
    return ranks;
}

std::vector<std::vector<int>> mesh_all_groups(const MeshShape& shape, MeshDimension dimension) {
    std::vector<std::vector<int>> groups;
    for (int rank = 0; rank < shape.world(); ++rank)
        if (group_rank(shape, dimension, mesh_coordinates(shape, rank)) == 0)
            groups.push_back(mesh_group_ranks(shape, dimension, rank));
    return groups;
}

std::vector<int> mesh_expert_group_ranks(const MeshShape& shape, int ep, int world_rank) {
    const std::vector<int> gradient_ranks = mesh_group_ranks(shape, MeshDimension::dp_cp, world_rank);
    const int at = group_rank(shape, MeshDimension::dp_cp, mesh_coordinates(shape, world_rank));
    const auto first = gradient_ranks.begin() + expert_parallel_group(at, ep) * ep;
    return {first, first + ep};
}

std::vector<int> mesh_expert_data_group_ranks(const MeshShape& shape, int ep, int world_rank) {
    const std::vector<int> gradient_ranks = mesh_group_ranks(shape, MeshDimension::dp_cp, world_rank);
    const int at = group_rank(shape, MeshDimension::dp_cp, mesh_coordinates(shape, world_rank));
    std::vector<int> ranks;
    for (std::size_t i = static_cast<std::size_t>(expert_data_parallel_group(at, ep)); i < gradient_ranks.size();
         i += static_cast<std::size_t>(ep))
        ranks.push_back(gradient_ranks[i]);
    return ranks;
}

Mesh::Mesh(Communicator& world, const MeshShape& shape)
    : shape_(shape), coordinates_(mesh_coordinates(shape, world.rank())) {
    if (world.size() != shape.world())
        throw std::logic_error("Mesh: world of " + std::to_string(world.size()) + " ranks for a mesh of " +
                               std::to_string(shape.world()));
    // Key = the group rank, so group rank i is mesh index i along the dimension.
    auto split = [&](MeshDimension dimension) {
        return world.split(group_color(shape, dimension, coordinates_), group_rank(shape, dimension, coordinates_));
    };
    dp_ = split(MeshDimension::dp);
    tp_ = split(MeshDimension::tp);
    pp_ = split(MeshDimension::pp);
    cp_ = split(MeshDimension::cp);
    if (shape.cp > 1) dp_cp_ = split(MeshDimension::dp_cp);
}

}  // namespace parbench

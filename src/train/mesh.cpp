#include "train/mesh.hpp"

#include <stdexcept>
#include <string>

namespace parbench {
namespace {

// The group along a dimension is identified by the other two coordinates.
int group_color(const MeshShape& shape, MeshDimension dimension, const MeshCoordinates& at) {
    switch (dimension) {
        case MeshDimension::dp: return at.pp * shape.tp + at.tp;
        case MeshDimension::tp: return at.pp * shape.dp + at.dp;
        case MeshDimension::pp: return at.dp * shape.tp + at.tp;
    }
    return 0;
}

int& coordinate(MeshCoordinates& at, MeshDimension dimension) {
    switch (dimension) {
        case MeshDimension::tp: return at.tp;
        case MeshDimension::pp: return at.pp;
        case MeshDimension::dp: break;
    }
    return at.dp;
}

int coordinate(const MeshCoordinates& at, MeshDimension dimension) {
    MeshCoordinates copy = at;
    return coordinate(copy, dimension);
}

int extent(const MeshShape& shape, MeshDimension dimension) {
    switch (dimension) {
        case MeshDimension::dp: return shape.dp;
        case MeshDimension::tp: return shape.tp;
        case MeshDimension::pp: return shape.pp;
    }
    return 1;
}

}  // namespace

MeshCoordinates mesh_coordinates(const MeshShape& shape, int world_rank) {
    if (world_rank < 0 || world_rank >= shape.world())
        throw std::out_of_range("mesh_coordinates: rank " + std::to_string(world_rank) + " outside the mesh");
    return MeshCoordinates{(world_rank / shape.tp) % shape.dp, world_rank % shape.tp,
                           world_rank / (shape.tp * shape.dp)};
}

int mesh_rank(const MeshShape& shape, const MeshCoordinates& at) {
    return (at.pp * shape.dp + at.dp) * shape.tp + at.tp;
}

std::vector<int> mesh_group_ranks(const MeshShape& shape, MeshDimension dimension, int world_rank) {
    const MeshCoordinates origin = mesh_coordinates(shape, world_rank);
    std::vector<int> ranks;
    for (int index = 0; index < extent(shape, dimension); ++index) {
        MeshCoordinates at = origin;
        coordinate(at, dimension) = index;
        ranks.push_back(mesh_rank(shape, at));
    }
    return ranks;
}

std::vector<std::vector<int>> mesh_all_groups(const MeshShape& shape, MeshDimension dimension) {
    std::vector<std::vector<int>> groups;
    for (int rank = 0; rank < shape.world(); ++rank)
        if (coordinate(mesh_coordinates(shape, rank), dimension) == 0)
            groups.push_back(mesh_group_ranks(shape, dimension, rank));
    return groups;
}

Mesh::Mesh(Communicator& world, const MeshShape& shape)
    : shape_(shape), coordinates_(mesh_coordinates(shape, world.rank())) {
    if (world.size() != shape.world())
        throw std::logic_error("Mesh: world of " + std::to_string(world.size()) + " ranks for a mesh of " +
                               std::to_string(shape.world()));
    // Key = the coordinate along the dimension, so group rank i is mesh index i.
    dp_ = world.split(group_color(shape, MeshDimension::dp, coordinates_), coordinates_.dp);
    tp_ = world.split(group_color(shape, MeshDimension::tp, coordinates_), coordinates_.tp);
    pp_ = world.split(group_color(shape, MeshDimension::pp, coordinates_), coordinates_.pp);
}

}  // namespace parbench

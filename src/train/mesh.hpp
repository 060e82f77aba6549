// The process mesh: world = pp x dp x tp, tensor parallelism innermost (consecutive ranks,
// which share a node and its fast links), pipeline outermost (Megatron-LM's order,
// arXiv 2104.04473 sec. 3.3). Each dimension's groups come from splitting the world
// communicator, so every scheme talks only to its own group.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.hpp"

namespace parbench {

struct MeshShape {
    int dp = 1;
    int tp = 1;
    int pp = 1;
    int world() const { return dp * tp * pp; }
};

struct MeshCoordinates {
    int dp = 0;
    int tp = 0;
    int pp = 0;
};

enum class MeshDimension { dp, tp, pp };

MeshCoordinates mesh_coordinates(const MeshShape& shape, int world_rank);
int mesh_rank(const MeshShape& shape, const MeshCoordinates& at);
// World ranks of the group along `dimension` that contains `world_rank`, in group-rank order.
std::vector<int> mesh_group_ranks(const MeshShape& shape, MeshDimension dimension, int world_rank);
// Every group along `dimension`, each in group-rank order (for the report).
std::vector<std::vector<int>> mesh_all_groups(const MeshShape& shape, MeshDimension dimension);

class Mesh {
  public:
    // Collective over `world`, whose size must be shape.world().
    Mesh(Communicator& world, const MeshShape& shape);

    const MeshShape& shape() const { return shape_; }
    const MeshCoordinates& coordinates() const { return coordinates_; }
    Communicator& dp() { return *dp_; }
    Communicator& tp() { return *tp_; }
    Communicator& pp() { return *pp_; }

  private:
    MeshShape shape_;
    MeshCoordinates coordinates_;
    std::unique_ptr<Communicator> dp_;
    std::unique_ptr<Communicator> tp_;
    std::unique_ptr<Communicator> pp_;
};

}  // namespace parbench

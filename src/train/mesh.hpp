// The process mesh: world = pp x dp x cp x tp, tensor parallelism innermost (consecutive
// ranks, which share a node and its fast links), then context parallelism, then data
// parallelism, pipeline outermost (Megatron-core's order tp-cp-dp-pp; Megatron-LM,
// arXiv 2104.04473 sec. 3.3, for tp-dp-pp). Each dimension's groups come from splitting the
// world communicator, so every scheme talks only to its own group.
//
// With context parallelism the ranks of a cp group hold different tokens of the same samples
// and train the same parameters, so gradients are averaged over dp x cp (Megatron-core's
// data-parallel-with-context group): Mesh::gradient_group() is that combined group, or the dp
// group itself when cp is 1.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "theory/layout.hpp"

namespace parbench {

struct MeshShape {
    int dp = 1;
    int tp = 1;
    int pp = 1;
    int cp = 1;
    int world() const { return dp * tp * pp * cp; }
};

// The mesh a resolved layout (theory/layout.hpp) runs on: its degrees.
MeshShape mesh_shape(const Layout& layout);

struct MeshCoordinates {
    int dp = 0;
    int tp = 0;
    int pp = 0;
    int cp = 0;
};

// dp_cp: the gradient group, every rank with the same tp and pp coordinates (dp x cp ranks).
enum class MeshDimension { dp, tp, pp, cp, dp_cp };

MeshCoordinates mesh_coordinates(const MeshShape& shape, int world_rank);
int mesh_rank(const MeshShape& shape, const MeshCoordinates& at);
// World ranks of the group along `dimension` that contains `world_rank`, in group-rank order
// (dp_cp: dp-major, cp-minor, so group rank dp·cp_size + cp).
std::vector<int> mesh_group_ranks(const MeshShape& shape, MeshDimension dimension, int world_rank);
// Every group along `dimension`, each in group-rank order (for the report).
std::vector<std::vector<int>> mesh_all_groups(const MeshShape& shape, MeshDimension dimension);
// Megatron-core's expert layout (theory/expert_parallel.hpp), in group-rank order: the
// expert-parallel group of `world_rank`, `ep` consecutive ranks of its dp x cp group, and its
// expert-data-parallel group, the dp x cp group's ranks at the same place in theirs.
std::vector<int> mesh_expert_group_ranks(const MeshShape& shape, int ep, int world_rank);
std::vector<int> mesh_expert_data_group_ranks(const MeshShape& shape, int ep, int world_rank);

class Mesh {
  public:
    // Collective over `world`, whose size must be shape.world().
    Mesh(Communicator& world, const MeshShape& shape);

    const MeshShape& shape() const { return shape_; }
    const MeshCoordinates& coordinates() const { return coordinates_; }
    Communicator& dp() { return *dp_; }
    Communicator& tp() { return *tp_; }
    Communicator& pp() { return *pp_; }
    Communicator& cp() { return *cp_; }
    // The group gradients are averaged over: dp x cp ranks (the dp group when cp is 1).
    Communicator& gradient_group() { return dp_cp_ ? *dp_cp_ : *dp_; }

  private:
    MeshShape shape_;
    MeshCoordinates coordinates_;
    std::unique_ptr<Communicator> dp_;
    std::unique_ptr<Communicator> tp_;
    std::unique_ptr<Communicator> pp_;
    std::unique_ptr<Communicator> cp_;
    std::unique_ptr<Communicator> dp_cp_;  // only when cp > 1
};

}  // namespace parbench

// The traffic one rank of a training run should see on each of its parallel groups, from the
// plan and the rank's coordinates (theory/rank_traffic.hpp, the formula `parbench plan` predicts
// with), and the same figures read from its communicators' counters for comparison.
#pragma once

#include <map>
#include <string>

#include "comm/communicator.hpp"
#include "theory/rank_traffic.hpp"
#include "train/mesh.hpp"
#include "train/train_options.hpp"

namespace parbench {

// By dimension ("dp", "tp", "pp"; with --cp "dp_cp" in place of "dp", the dp x cp gradient
// group, and "cp", theory/context_traffic.hpp), per step, for groups of more than one rank.
std::map<std::string, TrafficByOp> expected_rank_traffic(const TrainPlan& plan, const MeshShape& shape,
                                                         const MeshCoordinates& at);

// A group's counters over `steps` steps, per step.
TrafficByOp measured_traffic(const CommStats& stats, int steps);

}  // namespace parbench

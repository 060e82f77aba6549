// The traffic one rank of a training run should see on each of its parallel groups, from the
// plan and the part of the model the rank holds (plan/traffic.hpp's formulas), and the same
// figures read from its communicators' counters for comparison.
#pragma once

#include <map>
#include <string>

#include "comm/communicator.hpp"
#include "plan/traffic.hpp"
#include "train/mesh.hpp"
#include "train/model.hpp"
#include "train/train_options.hpp"

namespace parbench {

// By dimension ("dp", "tp", "pp"; with --cp "dp_cp" in place of "dp", the dp x cp gradient
// group, and "cp", plan/context_traffic.hpp), per step, for groups of more than one rank. `part` is the
// rank's pipeline part (inactive without pipelining), `model` the rank's model.
std::map<std::string, TrafficByOp> expected_rank_traffic(const TrainPlan& plan, const MeshShape& shape,
                                                         const MeshCoordinates& at, const PipelinePart& part,
                                                         const Model& model);

// A group's counters over `steps` steps, per step.
TrafficByOp measured_traffic(const CommStats& stats, int steps);

}  // namespace parbench

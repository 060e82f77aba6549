#pragma once

// predict_layout's traffic stage: every pipeline rank's traffic, by the formula train checks its
// counters against (theory/rank_traffic.hpp), priced into the prediction's comm lines on the
// cluster's links under the layout's schemes and byte convention (plan/state_rules.hpp).

#include <cstddef>
#include <optional>

#include "plan/layout_plan.hpp"

namespace parbench {

// Fills out.traffic_by_pp_rank and out.comm (and the MoE lines, plan/moe_plan.hpp) for the rank
// of out.memory.pp_rank; returns the index of DeepSpeed's re-gather line in out.comm, if one is
// added.
std::optional<std::size_t> predict_comm(PlanPrediction& out, const PlanLayout& p, const PlanContext& context,
                                        const ParameterLayout& whole, const EngineRank& rank);

}  // namespace parbench

// --search: every layout that divides the GPUs and the model, predicted, the ones that do
// not fit in memory dropped (counted by reason), ranked by predicted step time.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "plan/layout_plan.hpp"

namespace parbench {

struct SearchSpace {
    PlanLayout base;                   // model, global batch, precision, states, recompute, bucket
    std::vector<int> microbatch_counts{1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
    bool allow_cross_host_tp = false;
    bool engine_only = false;          // only what parbench's train can run (--states parbench)
};

struct SearchResult {
    std::vector<PlanPrediction> ranked;        // those that fit, fastest first
    int considered = 0;                        // layouts that divide the GPUs and the model
    std::map<std::string, int> dropped;        // reason -> count (memory, and what did not divide)
    PlanPrediction smallest_unfit;             // the least memory among those that did not fit
    bool any_unfit = false;
};

SearchResult search_layouts(const SearchSpace& space, const PlanContext& context);

}  // namespace parbench

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
    // Also the counts that cut each dp rank's batch into micro-batches of 1, 2, 4 and 8 sequences
    // (what a large batch needs: DeepSeek-V3's 15360 over 128 dp ranks is 120 micro-batches of
    // one), as far as a schedule's size allows; off when the user gave the list.
    bool extend_microbatch_counts = true;
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

// Why a search formed no layout at all (none even reached the memory check), in one line naming
// the flag to change and how: the global batch, which no layout's dp divides, the micro-batch
// list, none of whose counts divides a dp rank's batch, or the other reasons counted in
// `dropped`; empty when some layout formed (memory then decides).
std::string unformed_reason(const SearchResult& result, const SearchSpace& space, int gpus, bool batch_given);

// The drop reasons unformed_reason reads.
inline constexpr const char* batch_not_split_reason = "global batch not a multiple of dp";
inline constexpr const char* microbatch_list_reason = "no micro-batch count in the list divides dp's batch";

}  // namespace parbench

// The global batch a plan prices, and why (issue 36: a plan of one sequence per step, never
// said, once advised 12 % MFU layouts for Llama 3 8B on 64 GPUs). In order:
//   --global-batch;
//   under --states parbench, train's own default (the plan is of parbench's run);
//   --search under the frameworks' conventions: the model's trained batch (its config's
//     "trained_global_batch", cited there), else the tokens per step the frameworks' recipes
//     start from, recipe_tokens_per_step, in whole sequences;
//   one layout: dp x its micro-batches, one sequence each (what the layout flags give).
// Every plan prints the batch and its source, and every layout its micro-batch size.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "plan/layout_plan.hpp"
#include "theory/model_config.hpp"

namespace parbench {

// Llama 3's pre-training began at 4M tokens per step (arXiv 2407.21783 sec. 3.4.1: 4M tokens in
// sequences of 4,096, later 8M and 16M); GPT-3 trained its largest models at 3.2M (Brown et al.
// 2020, table 2.1); Megatron-Bridge's Llama 3 8B recipe runs 512 sequences of 8192 (4.2M).
inline constexpr double recipe_tokens_per_step = 4.0 * 1024 * 1024;

struct GlobalBatch {
    int sequences = 1;   // per step (MLP samples for an MLP)
    std::string source;  // why this batch: the flag, or the default's rule
};

// `given`: --global-batch (0: not given); `dp` and `microbatches`: the one layout's (unused by a
// search).
GlobalBatch plan_global_batch(int given, bool search, StateConvention states, const ModelConfig& model, int dp,
                              int microbatches);

nlohmann::json to_json(const GlobalBatch& batch, const ModelConfig& model);

}  // namespace parbench

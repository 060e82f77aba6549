#include "plan/global_batch.hpp"

#include <algorithm>
#include <cmath>

#include "theory/engine_defaults.hpp"

namespace parbench {

GlobalBatch plan_global_batch(int given, bool search, StateConvention states, const ModelConfig& model, int dp,
                              int microbatches) {
    if (given > 0) return {given, "--global-batch"};
    if (states == StateConvention::parbench)
        return {engine_default_global_batch, "--global-batch not given: train's default, which --states parbench plans"};
    if (!search)
        return {std::max(1, dp * microbatches), "--global-batch not given: dp x --microbatches, one sequence each"};
    if (model.trained_global_batch > 0)
        return {model.trained_global_batch,
                "--global-batch not given: the batch " + model.name + " was trained with (" + model.source + ")"};
    const double tokens = model.has_sequence() ? model.seq_len : 1.0;
    const int sequences = std::max(1, static_cast<int>(std::lround(recipe_tokens_per_step / tokens)));
    return {sequences, "--global-batch not given: 4M tokens per step, as the frameworks' recipes start (Llama 3, "
                       "arXiv 2407.21783 sec. 3.4.1); give --global-batch for your own"};
}

nlohmann::json to_json(const GlobalBatch& batch, const ModelConfig& model) {
    const double tokens = model.has_sequence() ? static_cast<double>(model.seq_len) : 1.0;
    return {{"global_batch", batch.sequences}, {"tokens_per_step", batch.sequences * tokens}, {"source", batch.source}};
}

}  // namespace parbench

#include "theory/expert_parallel.hpp"

#include <string>

#include "core/error.hpp"

namespace parbench {

void check_expert_parallel(const ModelConfig& model, int ep, int dp) {
    const std::string flag = "--ep " + std::to_string(ep);
    if (ep < 1) throw UsageError("--ep must be at least 1 (the ranks that split the experts)");
    if (ep == 1) return;
    if (!model.moe)
        throw UsageError(flag + ": model " + model.name + " has no experts (no \"moe\" in its config); drop --ep or "
                         "pick an MoE model such as llama-moe-tiny");
    if (model.moe->experts % ep != 0)
        throw UsageError(flag + " does not divide the " + std::to_string(model.moe->experts) + " experts of " +
                         model.name + "; use a divisor of " + std::to_string(model.moe->experts));
    if (dp % ep != 0)
        throw UsageError(flag + " does not divide the " + std::to_string(dp) +
                         " data-parallel ranks it is carved from (--dp " + std::to_string(dp) +
                         "); use a divisor of dp, or more ranks");
}

}  // namespace parbench

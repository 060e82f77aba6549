#include "theory/expert_parallel.hpp"

#include <string>

#include "core/error.hpp"

namespace parbench {

void check_expert_parallel(const ModelConfig& model, int ep, int dp, int cp) {
    const std::string flag = "--ep " + std::to_string(ep);
    if (ep < 1) throw UsageError("--ep must be at least 1 (the ranks that split the experts)");
    if (ep == 1) return;
    if (!model.moe)
        throw UsageError(flag + ": model " + model.name + " has no experts (no \"moe\" in its config); drop --ep or "
                         "pick an MoE model such as llama-moe-tiny");
    if (model.moe->experts % ep != 0)
        throw UsageError(flag + " does not divide the " + std::to_string(model.moe->experts) + " experts of " +
                         model.name + "; use a divisor of " + std::to_string(model.moe->experts));
    if ((dp * cp) % ep != 0) {
        const std::string ranks = cp > 1 ? "dp x cp = " + std::to_string(dp) + " x " + std::to_string(cp) + " = " +
                                               std::to_string(dp * cp)
                                         : "--dp " + std::to_string(dp);
        throw UsageError(flag + " does not divide the " + std::to_string(dp * cp) +
                         " data-parallel ranks it is carved from (" + ranks +
                         ", Megatron-core's layout); use a divisor of " + std::to_string(dp * cp) + ", or more ranks");
    }
}

}  // namespace parbench

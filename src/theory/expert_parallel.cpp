#include "theory/expert_parallel.hpp"

#include <string>

#include "core/error.hpp"

namespace parbench {

std::string dense_model_moe_flag_refusal(const std::string& flag, const ModelConfig& model) {
    return flag + ": model " + model.name + " has no experts (no \"moe\" in its config); expert parallelism and the "
           "--moe-* flags need a mixture-of-experts model, e.g. llama-moe-tiny or mixtral-8x7b; pick one or drop " +
           flag;
}

void check_expert_parallel(const ModelConfig& model, int ep, int dp, int cp) {
    const std::string flag = "--ep " + std::to_string(ep);
    if (ep < 1) throw UsageError("--ep must be at least 1 (the ranks that split the experts)");
    if (ep == 1) return;
    if (!model.moe) throw UsageError(dense_model_moe_flag_refusal(flag, model));
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

TrafficByOp expert_tensor_parallel_traffic(const ModelConfig& config, double tokens, int microbatches, int etp,
                                           const ModelShare& share, Recompute recompute) {
    TrafficByOp traffic;
    if (etp == 1 || !config.moe || share.moe_layers == 0) return traffic;
    const double layer_passes = static_cast<double>(microbatches) * share.moe_layers;
    const double rows_calls = layer_passes * (recompute == Recompute::full ? 3.0 : 2.0);
    CollectiveVolume& allreduce = traffic["allreduce"];
    allreduce.calls = rows_calls + layer_passes;
    allreduce.bytes = (rows_calls * tokens * config.hidden + layer_passes * tokens * config.moe->top_k) * sizeof(float);
    return traffic;
}

void check_expert_tensor_parallel(const ModelConfig& model, int etp, int tp, bool sequence_parallel) {
    const std::string flag = "--etp " + std::to_string(etp);
    if (etp < 1)
        throw UsageError(flag + ": the experts' tensor parallelism is 1 (experts whole on every tp rank) or the tp "
                         "degree (--tp " + std::to_string(tp) + "); use --etp 1 or drop the flag");
    if (etp == 1) return;
    if (tp == 1)
        throw UsageError(flag + " needs --tp " + std::to_string(etp) + ": the experts are split over the tp group; add "
                         "--tp " + std::to_string(etp) + " or drop --etp");
    if (etp != tp)
        throw UsageError(flag + ": the experts' tensor parallelism is 1 (experts whole on every tp rank) or the tp "
                         "degree (--tp " + std::to_string(tp) + "), over the tp group; use --etp 1 or --etp " +
                         std::to_string(tp));
    if (!model.moe) throw UsageError(dense_model_moe_flag_refusal(flag, model));
    if (model.moe->expert_hidden % etp != 0)
        throw UsageError(flag + " does not divide the experts' width " + std::to_string(model.moe->expert_hidden) +
                         " (expert_hidden of " + model.name + "); use --etp 1");
    if (sequence_parallel)
        throw UsageError(flag + " with --sp: the experts' tensor parallelism under sequence parallelism (Megatron-core's "
                         "all-gather and reduce-scatter over etp) is not built yet; drop --sp or use --etp 1");
}

}  // namespace parbench

#include "theory/moe_a2a_overlap_1f1b.hpp"

#include "core/error.hpp"

namespace parbench {

std::optional<std::string> moe_a2a_overlap_1f1b_refusal(const Layout& o) {
    const std::string flag = "--moe-a2a-overlap-1f1b ";
    if (o.ep <= 1) return flag + "needs --ep 2 or more: without expert parallelism there is no all-to-all to overlap";
    if (o.moe.a2a_overlap)
        return flag + "with --moe-a2a-overlap: pick one, halves within a micro-batch or one micro-batch under another's "
                      "pass";
    if (o.pp < 2 || o.schedule != ScheduleKind::one_f_one_b || o.virtual_stages != 1)
        return flag + "needs --pp 2 or more with --schedule 1f1b (one chunk per rank): it pairs 1F1B's steady-state "
                      "forward and backward passes; add --pp 2 --schedule 1f1b or use --moe-a2a-overlap";
    if (o.microbatches < 2)
        return flag + "needs --microbatches 2 or more: a rank pairs a forward with another micro-batch's backward";
    if (o.etp > 1)
        return flag + "with --etp " + std::to_string(o.etp) + ": the experts' tensor-parallel all-reduces are not "
                      "paired yet (untested); use --etp 1 or drop the flag";
    if (o.recompute == Recompute::full)
        return flag + "with --recompute full: the backward's recompute would share the forward's scratch with the "
                      "partner forward; use --recompute selective or none";
    if (o.cp > 1) return flag + "with --cp: context-parallel attention is not paired yet; drop --cp";
    return std::nullopt;
}

void check_moe_a2a_overlap_1f1b(const Layout& request) {
    if (const auto refusal = moe_a2a_overlap_1f1b_refusal(request)) throw UsageError(*refusal);
}

std::optional<std::string> moe_a2a_overlap_1f1b_stage_refusal(const ModelConfig& model,
                                                              const std::vector<LayerRange>& stage_ranges) {
    if (model.moe)
        for (std::size_t stage = 0; stage + 1 < stage_ranges.size(); ++stage)
            for (int layer = stage_ranges[stage].first; layer < stage_ranges[stage].end; ++layer)
                if (model.moe->is_moe_layer(layer)) return std::nullopt;
    return "--moe-a2a-overlap-1f1b: model " + model.name + " has MoE layers on the last pipeline stage only, which "
           "runs unpaired, so nothing would overlap; move some to earlier stages with --stage-layers, or drop the flag";
}

void check_moe_a2a_overlap_1f1b_stages(const ModelConfig& model, const std::vector<LayerRange>& stage_ranges) {
    if (const auto refusal = moe_a2a_overlap_1f1b_stage_refusal(model, stage_ranges)) throw UsageError(*refusal);
}

}  // namespace parbench

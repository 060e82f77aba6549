// What --moe-a2a-overlap-1f1b leaves out, refused the same way by train and plan: it pairs each
// steady-state forward of a 1F1B pipeline rank with the backward that follows it
// (theory/pipeline/paired_passes.hpp; train/pipeline/pipeline_executor.cpp runs the pairs, plan
// prices them, plan/moe_plan.hpp). Each refusal is one line naming the flag and the fix.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "theory/layout.hpp"
#include "theory/model_config.hpp"
#include "theory/model_layout.hpp"

namespace parbench {

// The message refusing the flag on this layout (its degrees, pipeline, recompute and MoE options
// as resolved from the flags), or nullopt when the layout takes it.
std::optional<std::string> moe_a2a_overlap_1f1b_refusal(const Layout& layout);
// Throws UsageError with moe_a2a_overlap_1f1b_refusal's message.
void check_moe_a2a_overlap_1f1b(const Layout& layout);

// Once the stages are known: the pairs run on every stage but the last, so one of those must
// hold an MoE layer, else the flag would change nothing. `stage_ranges`: the virtual stages'
// layers in stage order (one per rank under 1F1B).
std::optional<std::string> moe_a2a_overlap_1f1b_stage_refusal(const ModelConfig& model,
                                                              const std::vector<LayerRange>& stage_ranges);
void check_moe_a2a_overlap_1f1b_stages(const ModelConfig& model, const std::vector<LayerRange>& stage_ranges);

}  // namespace parbench

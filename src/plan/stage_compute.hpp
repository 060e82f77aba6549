// Each pipeline rank's compute for one micro-batch, from the work its layers do
// (theory/layer_work.hpp) on its device (plan/device_compute.hpp): forward (F), input gradient (B),
// weight gradient (W) and recompute, the first rank with the embedding, the last with the
// final norm, logits and loss. The step's compute is the busiest rank's, micro-batches times;
// the pipeline schedule's simulation takes its F, B and W per chunk.
#pragma once

#include <vector>

#include "plan/device_compute.hpp"
#include "plan/moe_plan.hpp"
#include "theory/layer_work.hpp"
#include "theory/memory.hpp"

namespace parbench {

struct StageCompute {
    int pp_rank = 0;
    int layers = 0;
    double forward_ms = 0, input_grad_ms = 0, weight_grad_ms = 0, recompute_ms = 0;
    double gemm_flops = 0;  // hardware FLOPs of one micro-batch (recompute included)
    double total_ms() const { return forward_ms + input_grad_ms + weight_grad_ms + recompute_ms; }
};

// One entry per pipeline rank (one without a pipeline). `experts`: an MoE model's, whose MoE
// layers do theory/moe_work.hpp's moe_layer_work on the busiest expert-parallel rank.
std::vector<StageCompute> stage_compute(const EngineLayout& layout, AttentionKind attention,
                                        const DeviceCompute& device, const ExpertParallel* experts = nullptr);

}  // namespace parbench

// Each pipeline rank's compute for one micro-batch, from the work its layers do
// (theory/layer_work.hpp) on its device (plan/device_compute.hpp): forward (F), input gradient (B),
// weight gradient (W) and recompute, the first rank with the embedding, the last with the
// final norm, logits and loss. The step's compute is the busiest rank's, micro-batches times;
// the pipeline schedule's simulation takes its F, B and W per chunk.
#pragma once

#include <functional>
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
std::vector<StageCompute> stage_compute(const Layout& layout, AttentionKind attention,
                                        const DeviceCompute& device, const PlanExperts* experts = nullptr);

// One micro-batch's forward and backward on a pipeline rank cut at its MoE exchanges, the points
// where --moe-a2a-overlap-1f1b hands the thread to the partner pass (plan/moe_plan.hpp): with n
// MoE layers on the rank, 2n + 1 stretches of compute each way. Forward: up to the first dispatch
// (the embedding, dense layers, the MoE layer's attention, router and routing traffic), the routed
// experts (to the combine), then the shared experts and on to the next dispatch, ... Backward, the
// layers in reverse: up to the first combine's mirror, the routed experts' backward (to the
// dispatch's mirror), the shared experts, router and attention and on, ... (theory/moe_work.hpp
// split_moe_pass). The backward is whole (input and weight gradients and any recompute: 1F1B).
struct ExchangeStretches {
    std::vector<double> forward_ms, backward_ms;
};
// Per pipeline rank; `pass_ms` times one piece of work (the device's model, or FLOPs at a rate).
std::vector<ExchangeStretches> moe_exchange_stretches(const Layout& layout, AttentionKind attention,
                                                      const PlanExperts& experts,
                                                      const std::function<double(const PassWork&)>& pass_ms);

}  // namespace parbench

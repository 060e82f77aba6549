// Each pipeline rank's compute for one micro-batch, from the work its layers do
// (theory/layer_work.hpp) on its device (plan/device_compute.hpp): forward (F), input gradient (B),
// weight gradient (W) and recompute, the first rank with the embedding, the last with the
// final norm, logits and loss. The step's compute is the busiest rank's, micro-batches times;
// the pipeline schedule's simulation takes its F, B and W per chunk.
#pragma once

#include <functional>
#include <vector>

#include "plan/compute_calibration.hpp"
#include "plan/device_compute.hpp"
#include "plan/moe_plan.hpp"
#include "plan/tp_comm_overlap.hpp"
#include "theory/layer_work.hpp"
#include "theory/memory.hpp"
#include "theory/pipeline/schedule_simulation.hpp"

namespace parbench {

struct StageCompute {
    int pp_rank = 0;
    int layers = 0;
    double forward_ms = 0, input_grad_ms = 0, weight_grad_ms = 0, recompute_ms = 0;
    double gemm_flops = 0;  // hardware FLOPs of one micro-batch (recompute included)
    // The linear layers' GEMMs of one micro-batch (forward, both gradients, recompute) that
    // Transformer Engine pairs with a tensor-parallel collective (plan/tp_comm_overlap.hpp).
    std::vector<TpOverlapGemm> tp_overlap_gemms;
    double total_ms() const { return forward_ms + input_grad_ms + weight_grad_ms + recompute_ms; }
};

// One entry per pipeline rank (one without a pipeline). `experts`: an MoE model's, whose MoE
// layers do theory/moe_work.hpp's moe_layer_work on the busiest expert-parallel rank.
// `framework_loss`: a framework's job (plan --states zero|megatron), its loss as its PyTorch code
// runs it (theory/layer_work.hpp); else parbench's own train's. `eager_elementwise`: a Llama job's
// element-wise ops as eager PyTorch runs them (plan --eager, theory/layer_work.hpp).
std::vector<StageCompute> stage_compute(const Layout& layout, AttentionKind attention,
                                        const DeviceCompute& device, const PlanExperts* experts = nullptr,
                                        bool framework_loss = false, bool eager_elementwise = false);

// Each pipeline rank's costs of one pass of one virtual stage (of `virtual_stages`), as the
// schedule simulation takes them: recompute runs with the backward; the weight gradient is its
// own pass when the schedule splits the backward (zero-bubble), else part of the backward.
std::vector<PassCosts> pipeline_pass_costs(const std::vector<StageCompute>& stages, int virtual_stages,
                                           bool split_backward);

// The factor that sets a device model to a measured train run of the same model on one rank
// (--calibrate-compute TRAIN_REPORT with --gemm-curve OPS_REPORT): the run's median step, less
// its optimizer at `optimizer_gbps` (AdamW's 28 B per parameter), over the model's compute for
// the run's micro-batches. `run_layout`: the plan's base layout, its degrees and batch replaced
// by the run's here. UsageError naming both flags for a run of several ranks or another model.
double measured_step_scale(const DeviceCompute& device, Layout run_layout, AttentionKind attention,
                           const ComputeRate::MeasuredRun& run, double optimizer_gbps);

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
                                                      const std::function<double(const PassWork&)>& pass_ms,
                                                      bool framework_loss = false);

}  // namespace parbench

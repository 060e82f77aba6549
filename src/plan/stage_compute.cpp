#include "plan/stage_compute.hpp"

#include "core/error.hpp"
#include "theory/moe_work.hpp"
#include "theory/model_layout.hpp"

namespace parbench {
namespace {

void add(StageCompute& stage, const LayerWork& work, const DeviceCompute& device, double times) {
    stage.forward_ms += times * device.pass_ms(work.forward);
    stage.input_grad_ms += times * device.pass_ms(work.input_grad);
    stage.weight_grad_ms += times * device.pass_ms(work.weight_grad);
    stage.recompute_ms += times * device.pass_ms(work.recompute);
    stage.gemm_flops += times * (work.forward.flops() + work.input_grad.flops() + work.weight_grad.flops() +
                                 work.recompute.flops());
    // A recompute forward runs the same modules, their collectives overlapped alike.
    for (const PassWork* pass : {&work.forward, &work.input_grad, &work.weight_grad, &work.recompute})
        for (const Gemm& g : pass->gemms)
            if (const auto method = te_overlap_of(g.name); method && g.flops() > 0 && times > 0)
                stage.tp_overlap_gemms.push_back({*method, device.gemm_ms(g) * device.step_scale, times});
}

}  // namespace

namespace {

LayerWorkShape layer_shape(const Layout& l, bool framework_loss = false, bool eager_elementwise = false) {
    LayerWorkShape shape;
    shape.framework_loss = framework_loss;
    shape.eager_elementwise = eager_elementwise;
    shape.model = l.model;
    shape.seq = l.local_seq_len();
    shape.keys = l.seq_len;
    shape.micro = l.microbatch_size;
    shape.tp = l.tp;
    shape.sp = l.sp;
    shape.element_bytes = l.precision == Precision::bf16 ? 2.0 : 4.0;
    return shape;
}

PassWork whole_backward(const LayerWork& work) {
    PassWork pass = work.input_grad;
    pass.add(work.weight_grad);
    pass.add(work.recompute);
    return pass;
}

}  // namespace

std::vector<StageCompute> stage_compute(const Layout& l, AttentionKind attention, const DeviceCompute& device,
                                        const PlanExperts* experts, bool framework_loss, bool eager_elementwise) {
    const LayerWorkShape shape = layer_shape(l, framework_loss, eager_elementwise);
    const bool mlp = !l.model.has_sequence();
    LayerWork layer = mlp ? mlp_layer_work(shape) : transformer_layer_work(shape, attention, l.recompute);
    if (mlp && l.recompute == Recompute::full) layer.recompute = layer.forward;
    const LayerWork head = mlp ? LayerWork{} : head_work(shape);
    const LayerWork embedding = mlp ? LayerWork{} : embedding_work(shape);
    std::vector<StageCompute> stages(static_cast<std::size_t>(l.pp));
    for (int r = 0; r < l.pp; ++r) stages[static_cast<std::size_t>(r)].pp_rank = r;
    if (l.pp == 1 || l.stage_ranges.empty()) {
        stages[0].layers = l.model.layers;
    } else {
        // Virtual stage i runs on rank i mod p (partition.hpp's order: chunk-major).
        for (std::size_t i = 0; i < l.stage_ranges.size(); ++i)
            stages[i % static_cast<std::size_t>(l.pp)].layers += l.stage_ranges[i].end - l.stage_ranges[i].first;
    }
    if (experts && experts->has_experts()) {
        LayerWorkShape expert_shape = shape;
        expert_shape.model = *experts->model;
        const LayerWork moe_layer =
            moe_layer_work(expert_shape, attention, l.recompute, l.ep, experts->effective_imbalance(l.ep));
        for (StageCompute& stage : stages) {
            int moe_layers = 0;
            for (const LayerRange& range : pipeline_rank_layers(l, stage.pp_rank))
                moe_layers += moe_layers_in(*experts->model, range.first, range.end);
            add(stage, layer, device, stage.layers - moe_layers);
            add(stage, moe_layer, device, moe_layers);
        }
    } else {
        for (StageCompute& stage : stages) add(stage, layer, device, stage.layers);
    }
    add(stages.front(), embedding, device, 1.0);
    add(stages.back(), head, device, 1.0);
    return stages;
}

double measured_step_scale(const DeviceCompute& device, Layout l, AttentionKind attention,
                           const ComputeRate::MeasuredRun& run, double optimizer_gbps) {
    const std::string flags = "--calibrate-compute with --gemm-curve";
    if (run.ranks != 1)
        throw UsageError(flags + ": the train report ran " + std::to_string(run.ranks) + " ranks; give a one-rank run "
                         "(its step is all compute and optimizer), or drop --gemm-curve to take its rate as it is");
    if (run.model != l.model.name)
        throw UsageError(flags + ": the train report ran " + run.model + ", the plan is of " + l.model.name +
                         "; give a run of the same model");
    l.dp = l.tp = l.pp = l.cp = 1;
    l.sp = false;
    l.zero = 0;
    l.stage_ranges.clear();
    l.microbatches = run.microbatches;
    l.microbatch_size = run.global_batch / run.microbatches;
    l.recompute = parse_recompute(run.recompute);
    DeviceCompute unscaled = device;
    unscaled.step_scale = 1.0;
    const double compute_ms = run.microbatches * stage_compute(l, attention, unscaled).front().total_ms();
    const double parameters = static_cast<double>(model_parameter_layout(l.model, l.seq_len).total_numel());
    const double optimizer_ms = parameters * 28.0 / (optimizer_gbps * 1e9) * 1e3;
    const double scale = (run.step_ms - optimizer_ms) / compute_ms;
    if (!(scale > 0))
        throw UsageError(flags + ": the run's step (" + std::to_string(run.step_ms) + " ms) is shorter than its optimizer "
                         "alone at the device's memory bandwidth; check the cluster file's memory_bandwidth_gbps");
    return scale;
}

std::vector<ExchangeStretches> moe_exchange_stretches(const Layout& l, AttentionKind attention,
                                                      const PlanExperts& experts,
                                                      const std::function<double(const PassWork&)>& pass_ms,
                                                      bool framework_loss) {
    std::vector<ExchangeStretches> out(static_cast<std::size_t>(l.pp));
    if (!experts.has_experts() || !l.model.has_sequence()) return out;
    const LayerWorkShape shape = layer_shape(l, framework_loss);
    const LayerWork dense = transformer_layer_work(shape, attention, l.recompute);
    LayerWorkShape expert_shape = shape;
    expert_shape.model = *experts.model;
    const LayerWork moe =
        moe_layer_work(expert_shape, attention, l.recompute, l.ep, experts.effective_imbalance(l.ep));
    const MoePassParts forward = split_moe_pass(moe.forward);
    const MoePassParts backward = split_moe_pass(whole_backward(moe));
    const double dense_forward = pass_ms(dense.forward), dense_backward = pass_ms(whole_backward(dense));
    const double forward_routed = pass_ms(forward.routed), forward_shared = pass_ms(forward.shared),
                 forward_rest = pass_ms(forward.rest);
    const double backward_routed = pass_ms(backward.routed), backward_shared = pass_ms(backward.shared),
                 backward_rest = pass_ms(backward.rest);
    const LayerWork embedding = embedding_work(shape), head = head_work(shape);
    for (int r = 0; r < l.pp; ++r) {
        ExchangeStretches& stretches = out[static_cast<std::size_t>(r)];
        std::vector<int> layers;
        for (const LayerRange& range : pipeline_rank_layers(l, r))
            for (int layer = range.first; layer < range.end; ++layer) layers.push_back(layer);
        // Forward: each MoE layer closes a stretch at its dispatch and another at its combine.
        double running = r == 0 ? pass_ms(embedding.forward) : 0.0;
        for (const int layer : layers) {
            if (!is_moe_layer(*experts.model, layer)) {
                running += dense_forward;
                continue;
            }
            stretches.forward_ms.push_back(running + forward_rest);
            stretches.forward_ms.push_back(forward_routed);
            running = forward_shared;
        }
        if (r == l.pp - 1) running += pass_ms(head.forward);
        stretches.forward_ms.push_back(running);
        // Backward, from the last layer: the combine's mirror first, then the dispatch's.
        running = r == l.pp - 1 ? pass_ms(whole_backward(head)) : 0.0;
        for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer) {
            if (!is_moe_layer(*experts.model, *layer)) {
                running += dense_backward;
                continue;
            }
            stretches.backward_ms.push_back(running);
            stretches.backward_ms.push_back(backward_routed);
            running = backward_shared + backward_rest;
        }
        if (r == 0) running += pass_ms(whole_backward(embedding));
        stretches.backward_ms.push_back(running);
    }
    return out;
}

std::vector<PassCosts> pipeline_pass_costs(const std::vector<StageCompute>& stages, int virtual_stages,
                                           bool split_backward) {
    const double v = virtual_stages;
    std::vector<PassCosts> costs;
    for (const StageCompute& s : stages)
        costs.push_back(PassCosts{s.forward_ms / v,
                                  (s.input_grad_ms + s.recompute_ms + (split_backward ? 0.0 : s.weight_grad_ms)) / v,
                                  split_backward ? s.weight_grad_ms / v : 0.0});
    return costs;
}

}  // namespace parbench

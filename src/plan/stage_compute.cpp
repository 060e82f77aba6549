#include "plan/stage_compute.hpp"

#include "theory/moe_work.hpp"

namespace parbench {
namespace {

void add(StageCompute& stage, const LayerWork& work, const DeviceCompute& device, double times) {
    stage.forward_ms += times * device.pass_ms(work.forward);
    stage.input_grad_ms += times * device.pass_ms(work.input_grad);
    stage.weight_grad_ms += times * device.pass_ms(work.weight_grad);
    stage.recompute_ms += times * device.pass_ms(work.recompute);
    stage.gemm_flops += times * (work.forward.flops() + work.input_grad.flops() + work.weight_grad.flops() +
                                 work.recompute.flops());
}

}  // namespace

std::vector<StageCompute> stage_compute(const EngineLayout& l, AttentionKind attention, const DeviceCompute& device,
                                        const ExpertParallel* experts) {
    LayerWorkShape shape;
    shape.model = l.model;
    shape.seq = l.local_seq_len();
    shape.keys = l.seq_len;
    shape.micro = l.microbatch_size;
    shape.tp = l.tp;
    shape.sp = l.sp;
    shape.element_bytes = l.precision == Precision::bf16 ? 2.0 : 4.0;
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
            moe_layer_work(expert_shape, attention, l.recompute, experts->ep, experts->effective_imbalance());
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

}  // namespace parbench

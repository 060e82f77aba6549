#include "theory/rank_traffic.hpp"

#include <algorithm>

#include "theory/context_parallel.hpp"

namespace parbench {

std::vector<int> model_parameter_use_order(const ModelConfig& config, const PipelinePart& part) {
    const int L = config.layers;
    std::vector<int> order;
    if (!config.has_sequence()) {
        for (int l = 0; l < L; ++l) order.push_back(l);
        for (int l = L - 2; l >= 0; --l) order.push_back(l);
        return order;
    }
    const int head = config.kind == ModelKind::llama ? L + 1 : 0;
    const std::vector<LayerRange> chunks = part.active() ? part.chunks : std::vector<LayerRange>{{0, L}};
    for (const LayerRange& chunk : chunks) {
        if (chunk.first == 0) order.push_back(0);
        // Block l is unit l + 1; an MoE layer's routed experts are acquired after it.
        auto push_block = [&](int l) {
            order.push_back(l + 1);
            if (moe_expert_unit(config, l) >= 0) order.push_back(moe_expert_unit(config, l));
        };
        for (int l = chunk.first; l < chunk.end; ++l) push_block(l);
        // GPT's whole model keeps the embedding held from the encoder into the head.
        const bool embedding_held = config.kind == ModelKind::gpt && !part.active();
        if (chunk.end == L && !embedding_held) order.push_back(head);
        for (int l = chunk.end - 1; l >= chunk.first; --l) push_block(l);
    }
    if (!part.active()) return order;
    const std::vector<int> held = pipeline_part_units(config, part);
    for (int& unit : order)
        unit = static_cast<int>(std::lower_bound(held.begin(), held.end(), unit) - held.begin());
    return order;
}

int model_parameter_units_held_at_once(const ModelConfig& config, const PipelinePart& part) {
    return config.kind == ModelKind::gpt && !part.active() ? 2 : 1;
}

std::map<std::string, TrafficByOp> engine_rank_traffic(const Layout& l, int pp_rank, int tp_rank,
                                                       const ParameterLayout* whole, int cp_rank) {
    const TensorSplit split{tp_rank, l.tp, l.sp, l.tp_style};
    // A prebuilt `whole` layout is tp rank 0's (plan's, built with Layout::expert_split): under
    // etp > 1 another tp rank counts its own expert slices.
    ParameterLayout layout = whole && (l.etp == 1 || tp_rank == 0)
                                 ? *whole
                                 : model_parameter_layout(l.model, l.seq_len, split, l.expert_split(tp_rank));
    ModelShare share = whole_model_share(l.model);
    PipelinePart part;
    std::vector<int> stages;  // the virtual stages this rank holds
    if (l.pp > 1) {
        share = ModelShare{0, false, false};
        for (int chunk = 0; chunk < l.virtual_stages; ++chunk) {
            const int stage = chunk * l.pp + pp_rank;
            const LayerRange& range = l.stage_ranges.at(static_cast<std::size_t>(stage));
            part.chunks.push_back(range);
            stages.push_back(stage);
            share.layers += range.end - range.first;
            for (int layer = range.first; layer < range.end; ++layer)
                share.moe_layers += l.model.moe && l.model.moe->is_moe_layer(layer);
            share.first_stage = share.first_stage || range.first == 0;
            share.last_stage = share.last_stage || range.end == l.model.layers;
        }
        layout = layout.select_units(pipeline_part_units(l.model, part));
    }
    std::map<std::string, TrafficByOp> traffic;
    // Under context parallelism the gradients are averaged over one group of dp x cp ranks
    // (train/mesh.hpp), and every per-token figure counts the rank's seq / cp tokens.
    const SchemeSettings scheme = l.scheme();
    const std::vector<int> use_order = model_parameter_use_order(l.model, part);
    const std::vector<int> expert_units = layout.routed_expert_units();
    if (expert_units.empty()) {
        if (l.gradient_ranks() > 1)
            traffic["dp"] = data_parallel_traffic(layout, l.gradient_ranks(), scheme, use_order);
    } else {
        // An MoE model's dense units over the gradient group, its routed experts over the
        // expert-data-parallel group (train/schemes/expert_split.cpp); without expert
        // parallelism that group is the gradient group itself, its traffic counted there.
        const std::vector<int> dense_units = layout.dense_units();
        const int edp = expert_data_parallel_size(l.gradient_ranks(), l.ep);
        TrafficByOp dense, experts;
        if (l.gradient_ranks() > 1)
            dense = data_parallel_traffic(layout.select_units(dense_units), l.gradient_ranks(), scheme,
                                          select_use_order(use_order, dense_units));
        if (edp > 1)
            experts = data_parallel_traffic(layout.select_units(expert_units), edp, scheme,
                                            select_use_order(use_order, expert_units));
        if (l.ep == 1) {
            for (const auto& [op, volume] : experts) {
                dense[op].calls += volume.calls;
                dense[op].bytes += volume.bytes;
            }
        } else if (!experts.empty()) {
            traffic["edp"] = experts;
        }
        if (!dense.empty()) traffic["dp"] = dense;
    }
    if (l.tp > 1)
        traffic["tp"] = tensor_parallel_traffic(l.model, l.local_seq_len(), l.microbatch_size, l.microbatches, split, share,
                                                l.recompute, l.ep);
    if (l.etp > 1) {
        // The experts' partial sums go over the tp group too (train counts them there).
        const TrafficByOp experts = expert_tensor_parallel_traffic(
            l.model, static_cast<double>(l.microbatch_size) * l.local_seq_len(), l.microbatches, l.etp, share, l.recompute);
        for (const auto& [op, volume] : experts) {
            traffic["tp"][op].calls += volume.calls;
            traffic["tp"][op].bytes += volume.bytes;
        }
    }
    if (l.cp > 1)
        traffic["cp"] = context_parallel_traffic(
            context_local_gqa_shape(l.model, l.microbatch_size, l.local_seq_len(), split),
            ContextSplit{cp_rank, l.cp, l.cp_style, l.cp_balance}, share.layers, l.microbatches, l.recompute);
    // Expert parallelism (MoE models): the dispatch and combine of this rank's MoE layers.
    if (l.ep > 1 && share.moe_layers > 0)
        traffic["ep"] = expert_parallel_traffic(l.model,
                                                static_cast<double>(l.microbatch_size) * l.local_seq_len() / (l.sp ? l.tp : 1),
                                                l.microbatches, l.ep, share, l.recompute, l.moe.a2a_overlap ? 2 : 1);
    if (l.pp > 1) {
        const double rows = static_cast<double>(l.microbatch_size) * l.local_seq_len() / (l.sp ? l.tp : 1);
        const double boundary_bytes = rows * l.model.hidden * sizeof(float);
        // GPT's unit 0 (embedding and tied head) is held by the first and the last stage; a rank
        // holding exactly one of them exchanges its gradient with the other (Model::shared_unit).
        const bool tied = l.model.kind == ModelKind::gpt && share.first_stage != share.last_stage;
        const double tied_bytes = tied ? static_cast<double>(layout.units().at(0).numel) * sizeof(float) : 0.0;
        traffic["pp"] = pipeline_traffic(stages, l.pp * l.virtual_stages, l.microbatches, boundary_bytes, tied_bytes);
    }
    return traffic;
}

}  // namespace parbench

#include "theory/model_layout.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace parbench {

namespace {

// An MoE block's tensors that stay in the block's unit: the router (E,C) and, with shared
// experts, their S MLPs stacked as one of width S·Fe (gate/up (S·Fe, C), down (C, S·Fe); a GELU
// MLP has no up). `residual_stddev`: the output projection's initial scale.
template <typename Block>
void add_moe_block_tensors(const ModelConfig& config, const std::string& p, float stddev, float residual_stddev,
                           ParameterLayout& layout, Block& b) {
    const ModelConfig::Moe& moe = *config.moe;
    const int C = config.hidden, E = moe.experts, SFe = moe.shared_experts * moe.expert_hidden;
    const bool gated = moe.activation == ExpertActivation::swiglu;
    b.router = layout.add_tensor(p + "router", {E, C}, InitKind::normal, stddev);
    if (SFe == 0) return;
    b.shared_gate = layout.add_tensor(p + (gated ? "shared.wgate" : "shared.fcw"), {SFe, C}, InitKind::normal, stddev);
    if (gated) b.shared_up = layout.add_tensor(p + "shared.wup", {SFe, C}, InitKind::normal, stddev);
    b.shared_down = layout.add_tensor(p + (gated ? "shared.wdown" : "shared.fcprojw"), {C, SFe}, InitKind::normal,
                                      residual_stddev);
}

// The routed experts of every MoE layer, one unit each after the model's own units (marked
// routed_experts), stacked expert-major: gate/up (E·Fe, C), down (E·C, Fe), expert e's (C, Fe)
// at row e·C. An expert-parallel rank holds the rows of its E/ep experts (Megatron-core's
// expert-model-parallel sharding).
template <typename Block>
void add_routed_expert_units(const ModelConfig& config, const ExpertSplit& experts, float stddev,
                             float residual_stddev, ParameterLayout& layout, std::vector<Block>& blocks) {
    const ModelConfig::Moe& moe = *config.moe;
    const int C = config.hidden, E = moe.experts, Fe = moe.expert_hidden;
    const bool gated = moe.activation == ExpertActivation::swiglu;
    const int local = E / experts.size;
    const int slice = Fe / experts.tensor_size;
    auto expert_rows = [&](int rows_each, int cols) {
        if (experts.size == 1) return std::vector<TensorPiece>{};
        return std::vector<TensorPiece>{TensorPiece{experts.rank * local * rows_each, 0, local * rows_each, cols}};
    };
    // Under --etp each local expert's slice: its Fe/etp rows of gate and up (column-parallel),
    // the same columns of its (C, Fe) down (row-parallel); stacked expert after expert.
    auto sliced = [&](bool first_matrix) {
        if (experts.tensor_size == 1) return expert_rows(first_matrix ? Fe : C, first_matrix ? C : Fe);
        std::vector<TensorPiece> pieces;
        for (int e = experts.rank * local; e < (experts.rank + 1) * local; ++e)
            pieces.push_back(first_matrix ? TensorPiece{e * Fe + experts.tensor_rank * slice, 0, slice, C}
                                          : TensorPiece{e * C, experts.tensor_rank * slice, C, slice});
        return pieces;
    };
    for (int l = 0; l < config.layers; ++l) {
        if (!moe.is_moe_layer(l)) continue;
        const std::string p = "h" + std::to_string(l) + ".";
        layout.add_unit(p + "experts", /*routed_experts=*/true);
        Block& b = blocks[static_cast<std::size_t>(l)];
        b.experts_gate = layout.add_tensor(p + (gated ? "experts.wgate" : "experts.fcw"), {E * Fe, C}, sliced(true),
                                           InitKind::normal, stddev);
        if (gated)
            b.experts_up = layout.add_tensor(p + "experts.wup", {E * Fe, C}, sliced(true), InitKind::normal, stddev);
        b.experts_down = layout.add_tensor(p + (gated ? "experts.wdown" : "experts.fcprojw"), {E * C, Fe},
                                           sliced(false), InitKind::normal, residual_stddev);
    }
}

}  // namespace

namespace gpt_layout {

Tensors build(const ModelConfig& config, int seq_len, const TensorSplit& split, ParameterLayout& layout,
              const ExpertSplit& experts) {
    const int C = config.hidden;
    const int V = config.vocab;
    const float residual_stddev = residual_init_stddev(config.layers);
    Tensors tensors;
    layout.add_unit("embedding");
    tensors.embedding.wte = layout.add_tensor("wte", {V, C}, column_parallel_rows(V, C, split), InitKind::normal,
                                                init_stddev);
    tensors.embedding.wpe = layout.add_tensor("wpe", {seq_len, C}, InitKind::normal, init_stddev);
    tensors.embedding.lnfw = layout.add_tensor("lnfw", {C}, InitKind::ones);
    tensors.embedding.lnfb = layout.add_tensor("lnfb", {C}, InitKind::zeros);
    for (int l = 0; l < config.layers; ++l) {
        const std::string p = "h" + std::to_string(l) + ".";
        layout.add_unit("h" + std::to_string(l));
        BlockTensors b{};
        b.ln1w = layout.add_tensor(p + "ln1w", {C}, InitKind::ones);
        b.ln1b = layout.add_tensor(p + "ln1b", {C}, InitKind::zeros);
        b.qkvw = layout.add_tensor(p + "qkvw", {3 * C, C}, head_parallel_qkv(C, C, split), InitKind::normal,
                                   init_stddev);
        b.qkvb = layout.add_tensor(p + "qkvb", {3 * C}, head_parallel_qkv(C, 1, split), InitKind::zeros);
        b.attprojw = layout.add_tensor(p + "attprojw", {C, C}, row_parallel_columns(C, C, split), InitKind::normal,
                                       residual_stddev);
        b.attprojb = layout.add_tensor(p + "attprojb", {C}, InitKind::zeros);
        b.ln2w = layout.add_tensor(p + "ln2w", {C}, InitKind::ones);
        b.ln2b = layout.add_tensor(p + "ln2b", {C}, InitKind::zeros);
        if (config.moe && config.moe->is_moe_layer(l)) {
            add_moe_block_tensors(config, p, init_stddev, residual_stddev, layout, b);
        } else {
            b.fcw = layout.add_tensor(p + "fcw", {4 * C, C}, column_parallel_rows(4 * C, C, split), InitKind::normal,
                                      init_stddev);
            b.fcb = layout.add_tensor(p + "fcb", {4 * C}, column_parallel_rows(4 * C, 1, split), InitKind::zeros);
            b.fcprojw = layout.add_tensor(p + "fcprojw", {C, 4 * C}, row_parallel_columns(C, 4 * C, split),
                                          InitKind::normal, residual_stddev);
            b.fcprojb = layout.add_tensor(p + "fcprojb", {C}, InitKind::zeros);
        }
        tensors.blocks.push_back(b);
    }
    if (config.moe) add_routed_expert_units(config, experts, init_stddev, residual_stddev, layout, tensors.blocks);
    return tensors;
}

}  // namespace gpt_layout

namespace llama_layout {

Tensors build(const ModelConfig& config, const TensorSplit& split, ParameterLayout& layout,
              const ExpertSplit& experts) {
    const int C = config.hidden;
    const int V = config.vocab;
    const int F = config.ffn_hidden;
    const int KVC = config.kv_heads * (config.hidden / config.heads);
    const bool kv_split = config.kv_heads % split.size == 0;
    const float residual_stddev = residual_init_stddev(config.layers);
    Tensors tensors;
    layout.add_unit("embedding");
    tensors.wte = layout.add_tensor("wte", {V, C}, column_parallel_rows(V, C, split), InitKind::normal, init_stddev);
    for (int l = 0; l < config.layers; ++l) {
        const std::string p = "h" + std::to_string(l) + ".";
        layout.add_unit("h" + std::to_string(l));
        BlockTensors b{};
        b.norm1 = layout.add_tensor(p + "norm1", {C}, InitKind::ones);
        b.wq = layout.add_tensor(p + "wq", {C, C}, column_parallel_rows(C, C, split), InitKind::normal, init_stddev);
        if (kv_split) {
            b.wk = layout.add_tensor(p + "wk", {KVC, C}, column_parallel_rows(KVC, C, split), InitKind::normal,
                                     init_stddev);
            b.wv = layout.add_tensor(p + "wv", {KVC, C}, column_parallel_rows(KVC, C, split), InitKind::normal,
                                     init_stddev);
        } else {
            b.wk = layout.add_tensor(p + "wk", {KVC, C}, InitKind::normal, init_stddev);
            b.wv = layout.add_tensor(p + "wv", {KVC, C}, InitKind::normal, init_stddev);
        }
        b.wo = layout.add_tensor(p + "wo", {C, C}, row_parallel_columns(C, C, split), InitKind::normal,
                                 residual_stddev);
        b.norm2 = layout.add_tensor(p + "norm2", {C}, InitKind::ones);
        if (config.moe && config.moe->is_moe_layer(l)) {
            add_moe_block_tensors(config, p, init_stddev, residual_stddev, layout, b);
        } else {
            b.wgate = layout.add_tensor(p + "wgate", {F, C}, column_parallel_rows(F, C, split), InitKind::normal,
                                        init_stddev);
            b.wup =
                layout.add_tensor(p + "wup", {F, C}, column_parallel_rows(F, C, split), InitKind::normal, init_stddev);
            b.wdown = layout.add_tensor(p + "wdown", {C, F}, row_parallel_columns(C, F, split), InitKind::normal,
                                        residual_stddev);
        }
        tensors.blocks.push_back(b);
    }
    layout.add_unit("head");
    tensors.norm_final = layout.add_tensor("norm_final", {C}, InitKind::ones);
    tensors.wout = layout.add_tensor("wout", {V, C}, column_parallel_rows(V, C, split), InitKind::normal, init_stddev);
    if (config.moe) add_routed_expert_units(config, experts, init_stddev, residual_stddev, layout, tensors.blocks);
    return tensors;
}

}  // namespace llama_layout

namespace mlp_layout {

LinearSplit layer_split(const TensorSplit& split, int layer) {
    if (split.style == TensorParallelStyle::allgather) return LinearSplit::column;
    return layer % 2 == 0 ? LinearSplit::column : LinearSplit::row;
}

bool input_in_slices(const TensorSplit& split, int layer) {
    return split.style == TensorParallelStyle::allgather && layer > 0;
}

std::vector<LayerTensors> build(const ModelConfig& config, const TensorSplit& split, ParameterLayout& layout) {
    const int H = config.hidden;
    const float stddev = mlp_init_stddev(H);
    std::vector<LayerTensors> layers;
    for (int l = 0; l < config.layers; ++l) {
        const std::string name = "layer" + std::to_string(l);
        layout.add_unit(name);
        LayerTensors t{};
        if (layer_split(split, l) == LinearSplit::row) {
            t.weight = layout.add_tensor(name + ".w", {H, H}, row_parallel_columns(H, H, split), InitKind::normal, stddev);
            t.bias = layout.add_tensor(name + ".b", {H}, InitKind::zeros);
        } else {
            const auto pieces = input_in_slices(split, l) ? column_parallel_rows_by_input_slice(H, H, split)
                                                          : column_parallel_rows(H, H, split);
            t.weight = layout.add_tensor(name + ".w", {H, H}, pieces, InitKind::normal, stddev);
            t.bias = layout.add_tensor(name + ".b", {H}, column_parallel_rows(H, 1, split), InitKind::zeros);
        }
        layers.push_back(t);
    }
    return layers;
}

}  // namespace mlp_layout

float residual_init_stddev(int layers) {
    return gpt_layout::init_stddev / std::sqrt(2.0f * static_cast<float>(layers));
}

// N(0, 1/h): unit variance through a linear layer (LeCun initialisation).
float mlp_init_stddev(int hidden) { return 1.0f / std::sqrt(static_cast<float>(hidden)); }

ParameterLayout gpt_parameter_layout(const ModelConfig& config, int seq_len, const TensorSplit& split,
                                     const ExpertSplit& experts) {
    ParameterLayout layout;
    gpt_layout::build(config, seq_len, split, layout, experts);
    return layout;
}

ParameterLayout llama_parameter_layout(const ModelConfig& config, const TensorSplit& split,
                                       const ExpertSplit& experts) {
    ParameterLayout layout;
    llama_layout::build(config, split, layout, experts);
    return layout;
}

int moe_expert_unit(const ModelConfig& config, int layer) {
    if (!config.moe || !config.moe->is_moe_layer(layer)) return -1;
    int before = 0;
    for (int l = 0; l < layer; ++l) before += config.moe->is_moe_layer(l) ? 1 : 0;
    // After GPT's embedding and blocks, or Llama's embedding, blocks and head.
    return config.layers + (config.kind == ModelKind::llama ? 2 : 1) + before;
}

ParameterLayout mlp_parameter_layout(const ModelConfig& config, const TensorSplit& split) {
    ParameterLayout layout;
    mlp_layout::build(config, split, layout);
    return layout;
}

bool llama_kv_heads_split(const ModelConfig& config, int tp) { return config.kv_heads % tp == 0; }

ParameterLayout model_parameter_layout(const ModelConfig& config, int seq_len, const TensorSplit& split,
                                       const ExpertSplit& experts) {
    if (config.kind == ModelKind::gpt) return gpt_parameter_layout(config, seq_len, split, experts);
    if (config.kind == ModelKind::llama) return llama_parameter_layout(config, split, experts);
    return mlp_parameter_layout(config, split);
}

std::vector<int> pipeline_part_units(const ModelConfig& config, const PipelinePart& part) {
    if (!config.has_sequence()) throw std::logic_error("pipeline_part_units: GPT and Llama models only");
    std::vector<int> units;
    if (config.kind == ModelKind::llama) {
        // Llama's unit 0 (the embedding) sits on the first stage, its head (unit L + 1) on
        // the last; block l is unit l + 1, its routed experts (an MoE layer's) go with it.
        for (const LayerRange& chunk : part.chunks) {
            if (chunk.first == 0) units.push_back(0);
            for (int l = chunk.first; l < chunk.end; ++l) {
                units.push_back(l + 1);
                if (moe_expert_unit(config, l) >= 0) units.push_back(moe_expert_unit(config, l));
            }
            if (chunk.end == config.layers) units.push_back(config.layers + 1);
        }
        std::sort(units.begin(), units.end());
        return units;
    }
    // GPT's unit 0 (embedding, final LayerNorm, tied output projection) sits on the first
    // stage and the last; block l is unit l + 1, its routed experts (an MoE layer's) go with it.
    bool embedding = false;
    for (const LayerRange& chunk : part.chunks)
        embedding = embedding || chunk.first == 0 || chunk.end == config.layers;
    if (embedding) units.push_back(0);
    for (const LayerRange& chunk : part.chunks)
        for (int l = chunk.first; l < chunk.end; ++l) {
            units.push_back(l + 1);
            if (moe_expert_unit(config, l) >= 0) units.push_back(moe_expert_unit(config, l));
        }
    std::sort(units.begin(), units.end());
    return units;
}

}  // namespace parbench

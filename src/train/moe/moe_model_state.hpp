// What a model (GPT or Llama) keeps of its MoE layers between forward, backward and the
// optimizer: per MoE layer this rank holds, the step's figures (MoeLayerStats), the balancing
// bias and the step's loads for DeepSeek-V3's aux-loss-free update, and each micro-batch's
// balancing losses. One per model; the MoeLayer itself (moe_layer.hpp) keeps no state across
// layers.
#pragma once

#include <array>
#include <map>
#include <vector>

#include "device/device.hpp"
#include "theory/model_config.hpp"
#include "theory/parameter_layout.hpp"
#include "train/models/transformer_parts.hpp"
#include "train/moe/moe_layer.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {

// The MoE layer a model builds: one routing group of `rows` tokens per micro-batch and rank,
// the config's experts, ep from the context's expert group. config.moe must be set.
MoeMemoryShape model_moe_shape(const ModelConfig& config, int rows, const MoeContext& context);

class MoeGradientPack;

class MoeModelState {
  public:
    // `held_layers`: the global MoE layers this rank holds, ascending. `device`: the model's,
    // where the bias update's loads are summed over the balance group.
    MoeModelState(const ModelConfig& config, const MoeContext& context, int microbatches,
                  const std::vector<int>& held_layers, Device& device);

    // The layer's balancing bias (E) and its all-to-all counters.
    const float* bias(int layer) const { return bias_[index(layer)].data(); }
    MoeExchangeStats& exchange(int layer) { return stats_[index(layer)].exchange; }
    // The global index of `microbatch`'s first sample this step (Model::stage_batch): the key of
    // its routing groups for --check (train/moe/routing_trace.hpp).
    void stage(int microbatch, std::uint64_t first_sample);
    // A forward's routing of MoE layer `layer` for `microbatch` into the step's figures.
    void count(int layer, int microbatch, const MoeForwardResult& result);

    // MoE layer `layer`'s forward through the model's MoeLayer `moe`, on this rank's rows x (all
    // of them without SP: no gather, no reduction), its routing counted unless `recomputing`.
    void forward(MoeLayer& moe, int layer, int microbatch, bool recomputing, float* out, const MoeActivations& a,
                 const float* x, const MoeWeights& w);
    // Its backward: dx += the input gradient, the gradients `whole` += through `pack` (summed
    // over tp under SP). The group's balancing loss weighs in the step loss as its `rows` rows
    // do (`loss_scale` per row).
    void backward(MoeLayer& moe, MoeGradientPack& pack, int layer, float* dx, const MoeGradients& whole,
                  const float* dout, const MoeActivations& a, const float* x, const MoeWeights& w, int rows,
                  float loss_scale);

    // Model's interface (train/model.hpp).
    double auxiliary_loss(int microbatch) const;
    std::vector<int> layers() const { return layers_; }
    std::vector<MoeLayerStats> finish_step();

  private:
    std::size_t index(int layer) const { return static_cast<std::size_t>(index_.at(layer)); }
    MoeLayerStats empty_stats() const;

    int experts_;
    MoeContext context_;
    Device& device_;
    std::vector<int> layers_;
    std::map<int, int> index_;               // global layer -> position in the vectors below
    std::vector<MoeLayerStats> stats_;       // this step's
    std::vector<std::vector<float>> bias_;   // (E) the balancing bias
    std::vector<std::vector<double>> routed_;  // (E) the step's loads (chosen assignments)
    Buffer loads_;  // the bias update's loads (layers x E doubles) while the balance group sums them
    std::vector<double> aux_losses_;         // (micro-batches x layers) the last forward's L_aux
    std::vector<std::uint64_t> first_samples_;  // (micro-batches) stage's
};

// Under sequence parallelism each tp rank routes its own R/t rows, so the gradients of an MoE
// layer's parameters (held whole on every tp rank) are partial sums: the layer's backward
// writes them into this pack, which is summed over the tp group and added to the gradients
// (as NormGradientPack does for the norms, arXiv 2205.05198 sec. 4.2.2). Without SP it is
// empty and the backward writes the gradients themselves.
class MoeGradientPack {
  public:
    MoeGradientPack(Ops& ops, TensorParallelGroup& tp) : ops_(ops), tp_(tp) {}
    void allocate(ActivationArena& arena, const MoeMemoryShape& shape);
    // Where the backward writes the gradients whose wholes are `whole` (zeroed pack, or `whole`).
    MoeGradients begin(const MoeGradients& whole);
    // Sums the pack over the group and adds it into `whole`.
    void finish(const MoeGradients& whole);

  private:
    std::array<std::size_t, 7> sizes_{};  // MoeGradients' tensors, in its order
    Ops& ops_;
    TensorParallelGroup& tp_;
    float* pack_ = nullptr;
};

// An MoE block's parameters (or gradients) as the MoE layer takes them: `block` the block's
// unit (router, shared experts), `experts` its routed experts' unit, `b` its tensor indices
// (gpt_layout's or llama_layout's BlockTensors; -1: absent, as a GELU expert's up matrix).
template <typename Pointer>
Pointer moe_tensor(const ParameterLayout& layout, Pointer unit, int tensor) {
    return tensor < 0 ? nullptr : unit + layout.tensor(tensor).offset_in_unit;
}
template <typename Block>
MoeWeights moe_weights(const ParameterLayout& layout, const float* block, const float* experts, const Block& b) {
    auto at = [&](const float* unit, int tensor) { return moe_tensor<const float*>(layout, unit, tensor); };
    return MoeWeights{at(block, b.router),      at(experts, b.experts_gate), at(experts, b.experts_up),
                      at(experts, b.experts_down), at(block, b.shared_gate),  at(block, b.shared_up),
                      at(block, b.shared_down)};
}
template <typename Block>
MoeGradients moe_gradients(const ParameterLayout& layout, float* block, float* experts, const Block& b) {
    auto at = [&](float* unit, int tensor) { return moe_tensor<float*>(layout, unit, tensor); };
    return MoeGradients{at(block, b.router),      at(experts, b.experts_gate), at(experts, b.experts_up),
                        at(experts, b.experts_down), at(block, b.shared_gate),  at(block, b.shared_up),
                        at(block, b.shared_down)};
}

}  // namespace parbench

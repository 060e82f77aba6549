// The mixture-of-experts MLP of a Llama block (Shazeer et al., arXiv 1701.06538; Mixtral,
// arXiv 2401.04088; DeepSeek-V3, arXiv 2412.19437 sec. 2.1.2), on host memory:
//
//   y_t = sum_{i < k, kept} w_ti · FFN_{e_ti}(x_t) + sum_{s < S} FFN_s(x_t)
//
// in five steps: the router (logits = x W_rᵀ (N,E) in fp32, then train/moe/router.hpp), the
// permutation of the kept assignments' rows into expert-major order (the dispatch), one SwiGLU
// FFN per expert over its contiguous rows, the combine (each token's kept outputs summed with
// their weights) and the shared experts over every token. Backward mirrors it: the combine
// gives each assignment its output gradient w·dy and its weight gradient dy·FFN(x), the
// experts' backward runs on the expert-major rows, the un-permutation adds them back to the
// tokens, and the router's backward turns the weight gradients (and the balancing loss's) into
// d(logits), then into d(x) and d(W_r).
//
// One MoeLayer serves every MoE layer of a model: its scratch is shared, each layer's kept
// state is an MoeActivations the model holds per layer (and per pipeline slot). Its sizes are
// theory/moe_memory.hpp's, which the memory ledger's counts are tested against.
//
// Host only: the engine refuses MoE models on a GPU (train_options.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "theory/moe_memory.hpp"
#include "train/moe/router.hpp"
#include "train/ops/ops.hpp"

namespace parbench {

class ActivationArena;

// What one MoE layer keeps from forward for backward, one micro-batch (MoeMemoryShape's
// kept buffers, in its order).
struct MoeActivations {
    RoutingBuffers routing;
    float* dispatched = nullptr;  // (N·k, C) the kept assignments' input rows, expert-major
    float* gate = nullptr;        // (N·k, Fe)
    float* up = nullptr;          // (N·k, Fe)
    float* glu = nullptr;         // (N·k, Fe)
    float* expert_out = nullptr;  // (N·k, C) each kept assignment's expert output
    float* shared_gate = nullptr;  // (N, S·Fe), null without shared experts
    float* shared_up = nullptr;
    float* shared_glu = nullptr;
};

// What a forward of one group decided, for the step's figures.
struct MoeForwardResult {
    RoutingCounts counts;
    double aux_loss = 0.0;  // the group's L_aux (0 when alpha is 0)
};

// The parameters of one MoE layer (pointers into its unit), and their gradients (same shapes).
struct MoeWeights {
    const float* router = nullptr;        // (E,C)
    const float* experts_gate = nullptr;  // (E·Fe, C)
    const float* experts_up = nullptr;    // (E·Fe, C)
    const float* experts_down = nullptr;  // (E·C, Fe)
    const float* shared_gate = nullptr;   // (S·Fe, C) or null
    const float* shared_up = nullptr;
    const float* shared_down = nullptr;   // (C, S·Fe)
};
struct MoeGradients {
    float* router = nullptr;
    float* experts_gate = nullptr;
    float* experts_up = nullptr;
    float* experts_down = nullptr;
    float* shared_gate = nullptr;
    float* shared_up = nullptr;
    float* shared_down = nullptr;
};

// Megatron-core's MoE flags, as train takes them (README "Mixture of experts").
struct MoeSettings {
    std::optional<double> capacity_factor;  // --moe-expert-capacity-factor; unset: dropless
    double aux_loss_coeff = 0.0;            // --moe-aux-loss-coeff (alpha)
    double bias_update_rate = 0.0;          // --moe-router-bias-update-rate (u); 0: no bias
};

// What a model's MoE layers need from the run: the settings, and the group whose ranks route
// the other parts of the step's batch (the gradient group, dp x cp), over which the
// aux-loss-free bias update sums the experts' loads; null: this rank alone.
struct MoeContext {
    MoeSettings settings;
    Communicator* balance_group = nullptr;
};

// One MoE layer's figures over the step so far (the model sums them over its micro-batches).
struct MoeLayerStats {
    std::vector<std::int64_t> tokens_per_expert;  // (E) kept assignments
    std::int64_t routed = 0;                      // assignments chosen
    std::int64_t dropped = 0;                     // of them dropped by the capacity
    double aux_loss = 0.0;                        // L_aux summed over the step's groups
    int groups = 0;                               // routing groups (micro-batches) counted
};

class MoeLayer {
  public:
    // N tokens per group (a micro-batch's rows on this rank), C the hidden size.
    MoeLayer(const MoeMemoryShape& shape, MoeScore score, const MoeSettings& settings, Ops& ops,
             ActivationArena& arena);

    MoeActivations allocate_activations(ActivationArena& arena) const;

    // out (N,C) = the layer's output for input x (N,C). `bias` (E): the layer's balancing bias.
    MoeForwardResult forward(float* out, const MoeActivations& a, const float* x, const MoeWeights& w,
                             const float* bias);
    // dx (N,C) += the input gradient from dout (N,C); grads +=. `balance_weight`: alpha times
    // the group's weight in the step loss.
    void backward(float* dx, const MoeGradients& g, const float* dout, const MoeActivations& a, const float* x,
                  const MoeWeights& w, double balance_weight);

    const MoeMemoryShape& shape() const { return shape_; }
    const RouterShape& router_shape() const { return router_; }
    const MoeSettings& settings() const { return settings_; }

  private:
    MoeMemoryShape shape_;
    RouterShape router_;
    MoeSettings settings_;
    Ops& ops_;
    // Scratch shared by the layers.
    float* logits_;       // (N,E)
    float* dlogits_;      // (N,E)
    float* dweights_;     // (N,k)
    float* dexpert_out_;  // (N·k, C)
    float* dglu_;         // (N·k, Fe); the shared experts' (N, S·Fe) reuse it when wider
    float* dgate_;        // (N·k, Fe) likewise
    float* dup_;          // (N·k, Fe) likewise
    float* ddispatched_;  // (N·k, C)
};

}  // namespace parbench

// The mixture-of-experts MLP of a Llama block (Shazeer et al., arXiv 1701.06538; Mixtral,
// arXiv 2401.04088; DeepSeek-V3, arXiv 2412.19437 sec. 2.1.2), on host memory:
//
//   y_t = sum_{i < k, kept} w_ti · FFN_{e_ti}(x_t) + sum_{s < S} FFN_s(x_t)
//
// in five steps: the router (logits = x W_rᵀ (N,E) in fp32, then train/moe/router.hpp), the
// permutation of the kept assignments' rows into expert-major order (the dispatch), one FFN
// per expert over its contiguous rows (SwiGLU, Llama's form, or GELU, GPT's: up, GELU, down,
// without biases as Megatron-core's grouped experts; MoeMemoryShape::activation), the combine (each token's kept outputs summed with
// their weights) and the shared experts over every token. Backward mirrors it: the combine
// gives each assignment its output gradient w·dy and its weight gradient dy·FFN(x), the
// experts' backward runs on the expert-major rows, the un-permutation adds them back to the
// tokens, and the router's backward turns the weight gradients (and the balancing loss's) into
// d(logits), then into d(x) and d(W_r).
//
// Expert parallelism (--ep, Megatron-core's expert-model-parallel size): the ep ranks of an
// expert-parallel group each run E/ep experts (rank q experts [q·E/ep, (q+1)·E/ep)). Routing stays
// on the tokens' rank; the dispatch is an alltoall of the kept rows' counts per expert and an
// alltoallv of the rows themselves (the expert-major order makes each destination's rows
// contiguous), the experts run on what arrives (source-major, expert-major within a source),
// and the combine is the alltoallv back, into the dispatch order, where the weighted sum runs
// as without ep. Backward sends the experts' output gradients the same way and their input
// gradients back. A rank holds the parameters of its E/ep experts only (the model's layout
// with an ExpertSplit, theory/model_layout.hpp); their gradients are averaged over the
// expert-data-parallel group (train/schemes/expert_split.cpp; docs/moe.md).
//
// The experts' own tensor parallelism (--etp = tp, Megatron-core's expert tensor parallelism):
// each routed expert's first matrices are column-parallel (a rank's Fe/etp rows), its second
// row-parallel (the same Fe/etp columns), as the dense MLP (Megatron-LM, arXiv 1909.08053 sec. 3).
// Without SP every tp rank routes the same tokens the same way and exchanges the same rows, so a
// rank's experts yield partial outputs; the combine's weighted sum is linear in them, so the
// rank combines its partials into an (N,C) sum and all-reduces that over the tp group, one
// fixed-size all-reduce per layer as the dense MLP's (rather than one of the routing-sized
// received rows before the combine), before the shared experts' output is added. Backward
// mirrors it: the output gradients are the same on every tp rank; the combine weights' gradients
// dy·FFN(x), partial like the kept outputs, are all-reduced over tp (N·k floats); each rank
// computes its slices' weight gradients and its partial input gradients, un-permutes them into
// an (N,C) sum and all-reduces it over tp. The all-reduces run on the tp group's communicator (the report's tp).
//
// One MoeLayer serves every MoE layer of a model: its scratch is shared, each layer's kept
// state is an MoeActivations the model holds per layer (and per pipeline slot). Its sizes are
// theory/moe_memory.hpp's, which the memory ledger's counts are tested against.
//
// Overlap (--moe-a2a-overlap, MoeSettings::a2a_overlap): each exchange goes as two non-blocking
// alltoallv halves, so one half's all-to-all runs while the other half's experts compute, the
// adaptive pipelining of Tutel (arXiv 2206.03382) at degree 2 and the two-part split DeepSeek-V3
// overlaps prefilling with (arXiv 2412.19437 sec. 3.4.1), within one layer and micro-batch:
// forward, both dispatch halves go out, the first half's experts run while the second arrives,
// its combine goes back while the second half's experts run, and the shared experts run while
// the combines travel; backward mirrors it, the shared experts' and the router's weight
// gradients computed while the last input gradients travel (their input gradients are added
// after the un-permutation, in the blocking order). The halves are the first and second half
// of each rank's local experts (E/ep >= 2), else of the source ranks (E/ep = 1); both keep the
// blocking path's received layout, chunks and per-expert accumulation order, so results are
// bit-identical to it. Their sizes come from host_'s row counts, which are on the host before
// the first half goes out (forward: after the counts' alltoall; backward: fetch_row_counts).
// Open MPI progresses a non-blocking collective on one host only inside MPI calls: the layer
// polls the halves in flight (test()) after each chunk of an expert's rows and between the
// shared experts' ops.
//
// Device-agnostic: the per-token and per-element steps are Ops calls (CpuOps, or CudaOps's
// kernels/moe.cu and cuBLAS on a GPU), the alltoall(v)s the expert group's Communicator's (NCCL
// on GPUs). The capacity and the expert-major order are decided on the host, in
// assign_expert_rows (train/moe/router.hpp), the same code on either device, so routing is
// deterministic; on a GPU that makes each MoE layer sync its stream twice (docs/moe.md): in forward, to copy the chosen experts and weights (N·k each) to the host and the
// rows back, and in backward, to copy the layer's rows per expert (E+1, and E under ep) back
// for the expert loop and the exchange's sizes. With the balancing loss, forward also copies
// the scores (N·E) for it. Under ep each blocking all-to-all is timed between two syncs, so the
// reported dispatch and combine times are the exchanges' own. Under --moe-a2a-overlap on a GPU
// the halves run on NCCL's side stream (comm/nccl_communicator.hpp) and a half's wait() makes
// the layer's stream wait for it, so no kernel reads a half's rows before they arrive; the
// stream is synced before each half is issued and around each wait, so a half's time runs from
// when its data is ready and its exposed time is how long the stream stood waiting for it,
// the host's blocked time as on the CPU (more syncs per layer than the blocking path's: the
// price of measuring the exposure).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "core/poll_registry.hpp"
#include "theory/layout.hpp"  // MoeSettings: the layout's MoE options
#include "theory/moe_memory.hpp"
#include "train/matmuls.hpp"
#include "train/moe/router.hpp"
#include "train/moe/routing_trace.hpp"
#include "train/ops/ops.hpp"

namespace parbench {

class ActivationArena;

// What one MoE layer keeps from forward for backward, one micro-batch (MoeMemoryShape's
// kept buffers, in its order).
struct MoeActivations {
    RoutingBuffers routing;
    float* dispatched = nullptr;  // (N·k, C) the kept assignments' input rows, expert-major
    float* gate = nullptr;        // (Re, Fe); Re = MoeMemoryShape::expert_rows(); GELU: the pre-activation
    float* up = nullptr;          // (Re, Fe); null for GELU experts
    float* glu = nullptr;         // (Re, Fe) the activation: silu(gate)·up or gelu(gate)
    float* expert_out = nullptr;  // (N·k, C) each kept assignment's expert output
    // Under expert parallelism: the rows received (Re, C), the experts' outputs for them
    // (Re, C), and the rows received per (source, local expert) (ep x E/ep). Without it the
    // first two are dispatched and expert_out, the counts null.
    float* received = nullptr;
    float* received_out = nullptr;
    int* received_counts = nullptr;
    float* shared_gate = nullptr;  // (N, S·Fe), null without shared experts
    float* shared_up = nullptr;
    float* shared_glu = nullptr;
};

// --check's hold on one group's routing (train/moe/routing_trace.hpp): the decisions to take
// instead of the router's own (null: its own), where to copy the decisions taken (null:
// nowhere), and where to list the tokens whose own choice `follow` overrode (needed with follow).
// A decision per assignment: its expert e, or -(e + 1) where the capacity dropped it.
struct RoutingHold {
    const int* follow = nullptr;           // (N, k)
    std::vector<int>* taken = nullptr;     // (N, k), written
    std::vector<GroupFlip>* flips = nullptr;
};

// What a forward of one group decided, for the step's figures.
struct MoeForwardResult {
    RoutingCounts counts;
    double aux_loss = 0.0;  // the group's L_aux (0 when alpha is 0)
};

// The parameters of one MoE layer (pointers into its units), and their gradients (same shapes).
// Under expert parallelism the routed experts' are this rank's E/ep experts, stacked as below.
struct MoeWeights {
    const float* router = nullptr;        // (E,C)
    const float* experts_gate = nullptr;  // (E·Fe, C); GELU experts: the up (first) matrix
    const float* experts_up = nullptr;    // (E·Fe, C); null for GELU experts
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

// What a model's MoE layers need from the run: the settings, the group whose ranks route the
// other parts of the step's batch (the gradient group, dp x cp), over which the aux-loss-free
// bias update sums the experts' loads (null: this rank alone), the expert-parallel group
// (null or of one rank: every expert runs here), and the group each routed expert's width is
// split over (--etp: the tp group; null: experts whole).
// --check (train/moe/routing_trace.hpp): the trace that records the run's routing, or the one
// the serial reference follows (at most one; both null: neither).
struct MoeContext {
    MoeSettings settings;
    Communicator* balance_group = nullptr;
    Communicator* expert_group = nullptr;
    Communicator* expert_tensor_group = nullptr;
    RoutingTrace* record_routing = nullptr;
    RoutingTrace* follow_routing = nullptr;
};

// The all-to-alls of one MoE layer over the step so far (forward and backward, a full
// recompute's forward included), as the expert-parallel communicator counts them.
struct MoeExchangeStats {
    double dispatch_ms = 0.0;  // the dispatch alltoallv, forward, and the output gradients' in backward
    double combine_ms = 0.0;   // the combine alltoallv, forward, and the input gradients' in backward
    double counts_ms = 0.0;    // the alltoall of the rows per expert before each forward's dispatch
    // The host's time blocked in the calls above (the counts' alltoall blocks: all of counts_ms
    // is exposed). A blocking call is all exposed; an overlapped half counts its issue, every
    // test() that polled it and its wait() (on a GPU each blocking call and each wait between
    // two stream syncs: the stream's wait for it), while *_ms counts it from its issue to the test
    // or wait that saw it complete (the communicator's convention), compute it overlapped included.
    double dispatch_exposed_ms = 0.0;
    double combine_exposed_ms = 0.0;
    double dispatch_bytes = 0.0;  // what the communicator counts per call: max(sent, received)
    double combine_bytes = 0.0;
    double counts_bytes = 0.0;
    int alltoallv_calls = 0;
    int alltoall_calls = 0;
};

// One MoE layer's figures over the step so far (the model sums them over its micro-batches).
struct MoeLayerStats {
    std::vector<std::int64_t> tokens_per_expert;  // (E) kept assignments
    std::int64_t routed = 0;                      // assignments chosen
    std::int64_t dropped = 0;                     // of them dropped by the capacity
    double aux_loss = 0.0;                        // L_aux summed over the step's groups
    int groups = 0;                               // routing groups (micro-batches) counted
    MoeExchangeStats exchange;                    // under expert parallelism
};

class MoeLayer {
  public:
    // N tokens per group (a micro-batch's rows on this rank), C the hidden size.
    // shape.ep must be the size of `expert_group` (null: 1).
    // `expert_matmuls`: the run's precision for the experts' matmuls (train/matmuls.hpp; bf16
    // operands under --precision bf16, as Megatron-core's experts); null: fp32. The router
    // stays fp32 whatever the precision (Megatron-core's router dtype fp32).
    // `expert_tensor_group`: the group of shape.etp ranks each routed expert is split over (null: 1).
    MoeLayer(const MoeMemoryShape& shape, MoeScore score, const MoeSettings& settings, Ops& ops,
             ActivationArena& arena, Communicator* expert_group = nullptr,
             Communicator* expert_tensor_group = nullptr, Matmuls* expert_matmuls = nullptr);

    MoeActivations allocate_activations(ActivationArena& arena) const;

    // out (N,C) = the layer's output for input x (N,C). `bias` (E): the layer's balancing bias.
    // `exchange`: where the all-to-alls are counted. `hold`: --check's (RoutingHold).
    MoeForwardResult forward(float* out, const MoeActivations& a, const float* x, const MoeWeights& w,
                             const float* bias, MoeExchangeStats& exchange, const RoutingHold& hold = {});
    // dx (N,C) += the input gradient from dout (N,C); grads +=. `balance_weight`: alpha times
    // the group's weight in the step loss.
    void backward(float* dx, const MoeGradients& g, const float* dout, const MoeActivations& a, const float* x,
                  const MoeWeights& w, double balance_weight, MoeExchangeStats& exchange);

    // --moe-a2a-overlap-1f1b: each blocking dispatch and combine (and their backward mirrors)
    // is posted non-blocking, then `on_post` runs (the pipeline executor hands the thread to the
    // partner micro-batch's pass, core/fiber_pair.hpp), then the exchange is waited for; timed as
    // an overlapped half (MoeExchangeStats). What the layer reads after the switch is its
    // micro-batch's own (its activations, the chunks and plans, made before the post, on the
    // fiber's stack) or scratch the partner's pass, of the other direction, never writes (the d*
    // buffers are the backward's alone; logits_, host_ and dlogits_ are each written and read
    // between two posts). Empty: blocking, as before. Either way the math is the same.
    // While a pass is suspended its exchange is registered in in_flight_, and the partner pass,
    // which runs through this same layer, polls it (test()) where --moe-a2a-overlap polls its
    // halves, after each expert chunk and between the shared experts' matmuls, and at the end of
    // its MoE forward or backward: Open MPI moves a non-blocking exchange on only inside MPI
    // calls, so unpolled it would wait for the partner's next post or for its own wait().
    // (Polling between every expert matmul as well completed no more of them before their wait
    // in a probe, at 3.7 times the polls: results/2026-12-02-moe-all-to-all/2026-12-02-pair-poll.md.)
    void set_exchange_switch(std::function<void()> on_post) { exchange_switch_ = std::move(on_post); }

    const MoeMemoryShape& shape() const { return shape_; }
    const RouterShape& router_shape() const { return router_; }
    const MoeSettings& settings() const { return settings_; }

  private:
    // A run of rows on the experts' side that one expert computes: rows [first, first + rows).
    struct ExpertChunk {
        int expert, first, rows;
        int source = 0;  // the rank whose tokens they are (0 without ep)
    };
    // Those of the group whose row counts host_ holds (route, or fetch_row_counts in backward).
    std::vector<ExpertChunk> expert_chunks() const;
    // Where a chunk starts in the experts' [rows x C] buffers (`in`) and [rows x Fr] activations
    // (`wide`), and where its expert's weights start among this rank's stacked experts (`weight`).
    struct ChunkOffsets {
        std::size_t in, wide, weight;
    };
    ChunkOffsets chunk_offsets(const ExpertChunk& chunk) const;
    bool parallel() const { return shape_.ep > 1; }
    bool tensor_parallel_experts() const { return shape_.etp > 1; }
    bool gated() const { return shape_.activation == ExpertActivation::swiglu; }
    // One expert MLP (or the shared experts' one of width S·Fe) over `rows` rows of x: gate
    // (and up) (rows, width), their activation `act`, out (rows, C) = act · w_downᵀ. A GELU
    // expert has no up matrix (null). Backward: dx, the weight gradients += (dx null: the
    // weight gradients only, leaving d(gate) and d(up) in dgate_/dup_ for
    // expert_input_gradient, which adds dx later, as --moe-a2a-overlap does). `between` runs
    // after each matmul: the overlap's polls of the halves in flight.
    void expert_forward(float* out, float* gate, float* up, float* act, const float* x, const float* w_gate,
                        const float* w_up, const float* w_down, int rows, int width,
                        const std::function<void()>& between = {});
    void expert_backward(float* dx, float* g_gate, float* g_up, float* g_down, const float* dout, const float* gate,
                         const float* up, const float* act, const float* x, const float* w_gate, const float* w_up,
                         const float* w_down, int rows, int width, const std::function<void()>& between = {});
    void expert_input_gradient(float* dx, const float* x, const float* w_gate, const float* w_up, int rows, int width);
    void expert_matmul_backward(float* di, float* dw, const float* d, const float* i, const float* w, int rows, int in,
                                int outs);
    // The first expert whose weights this rank holds (its E/ep experts are stacked from it).
    int first_local_expert() const { return parallel() ? expert_group_->rank() * local_experts_ : 0; }
    // The per-rank row counts (elements of C floats) and offsets of an exchange: what this rank
    // sends (its dispatch order) and receives (source-major), for the group host_ holds.
    struct ExchangePlan {
        std::vector<std::size_t> send_counts, send_offsets, recv_counts, recv_offsets;
    };
    // `half` (0, 1) under --moe-a2a-overlap: only the rows of that half's chunks; -1: all of them.
    ExchangePlan exchange_plan(int half = -1) const;
    // The local experts [first, end) of `source`'s chunks in `half` (-1: all of them).
    std::pair<int, int> half_experts(int source, int half) const;
    bool in_half(const ExpertChunk& chunk, int half) const;
    // Sends `from` (dispatch order) to the experts' ranks, into `to` (received order); `back`:
    // the other way. Timed into `ms` and `exposed_ms`, its bytes counted into `bytes` (as the
    // communicator counts them).
    void exchange(const float* from, float* to, const ExchangePlan& plan, bool back, double& ms, double& exposed_ms,
                  double& bytes, MoeExchangeStats& stats);
    // The same exchange issued without waiting (--moe-a2a-overlap), timed when it completes.
    class InFlight;
    InFlight issue_exchange(const float* from, float* to, const ExchangePlan& plan, bool back, double& ms,
                            double& exposed_ms, double& bytes, MoeExchangeStats& stats);

    // forward and backward run in named stages over one pass's exchanges (PassExchanges, defined
    // in moe_layer.cpp).
    struct PassExchanges;
    // Forward: the router's logits, the routing and the permutation into expert-major rows;
    // under ep the rows per expert (exchange_counts) and the rows to the experts' ranks
    // (send_to_experts, which returns the chunks the experts run); the experts and the outputs
    // back; the shared experts and the weighted combine; the group's balancing loss.
    RoutingCounts route_and_permute(const MoeActivations& a, const float* x, const MoeWeights& w, const float* bias,
                                    const RoutingHold& hold);
    std::vector<ExpertChunk> send_to_experts(const MoeActivations& a, const RoutingCounts& counts,
                                             PassExchanges& pass, MoeExchangeStats& stats);
    void exchange_counts(const MoeActivations& a, const RoutingCounts& counts, MoeExchangeStats& stats);
    void experts_forward(const MoeActivations& a, const MoeWeights& w, const std::vector<ExpertChunk>& chunks,
                         PassExchanges& pass, MoeExchangeStats& stats);
    void combine(float* out, const MoeActivations& a, const float* x, const MoeWeights& w, PassExchanges& pass);
    double group_aux_loss(const MoeActivations& a, const RoutingCounts& counts);
    // Backward: the combine's (and the host's row counts), the output gradients to the experts'
    // ranks, the experts' backward and the input gradients back, under overlap the shared
    // experts' and router's weight gradients while those travel, then the input gradient.
    void combine_backward(const float* dout, const MoeActivations& a);
    void send_output_gradients(PassExchanges& pass, MoeExchangeStats& stats);
    void experts_backward(const MoeGradients& g, const MoeActivations& a, const MoeWeights& w,
                          const std::vector<ExpertChunk>& chunks, PassExchanges& pass, MoeExchangeStats& stats);
    void weight_gradients_in_flight(const MoeGradients& g, const float* dout, const MoeActivations& a, const float* x,
                                    const MoeWeights& w, double balance_weight, PassExchanges& pass);
    void input_gradient(float* dx, const MoeGradients& g, const float* dout, const MoeActivations& a, const float* x,
                        const MoeWeights& w, double balance_weight, bool overlapped);
    // d(logits) into dlogits_ from the combine weights' gradients (and the balancing loss's).
    void router_backward(const MoeActivations& a, double balance_weight);

    // Routes a group: the router's per-token part through ops_ (from logits_), the rest on
    // the host (assign_expert_rows), its decisions copied into `routing` (device memory) and
    // kept in host_ for the expert loop and the exchange (train/moe/moe_host_routing.cpp).
    // `hold`: as forward's; following, a token whose own choice differs takes hold.follow's,
    // its combine weights recomputed from its scores for those experts.
    RoutingCounts route(const RoutingBuffers& routing, const float* bias, const RoutingHold& hold);
    void follow_routing(const RoutingBuffers& routing, const float* bias, const RoutingHold& hold);
    // Fills host_'s row counts from a's (device memory) before its backward.
    void fetch_row_counts(const MoeActivations& a);
    // The host copies of what routing decided, for the steps that run on the host; expert_start
    // and received_counts are those of the forward or backward running now.
    struct HostRouting {
        std::vector<int> chosen, slot, expert_start, routed, received_counts;
        std::vector<float> weights, scores;
        std::vector<int> followed_chosen;            // --check's reference: the run's experts (RoutingHold)
        std::vector<unsigned char> followed_kept;    // ... and which the capacity kept
    };
    HostRouting host_;
    std::function<void()> exchange_switch_;  // set_exchange_switch
    // The exchanges posted under exchange_switch_ whose passes are suspended (at most one per
    // pass of the pair); the partner's poll_partners() tests them.
    PollRegistry in_flight_;
    void poll_partners() const { in_flight_.poll_all(); }

    MoeMemoryShape shape_;
    RouterShape router_;
    MoeSettings settings_;
    Ops& ops_;
    Matmuls* expert_matmuls_;     // null: the experts' matmuls in fp32 through ops_
    Communicator* expert_group_;  // null without expert parallelism
    Communicator* expert_tensor_group_;  // null without --etp
    int local_experts_;           // E / ep
    std::vector<int> kept_per_expert_;  // (E) the alltoall's send counts, staged into dlogits_
    // Scratch shared by the layers.
    float* logits_;       // (N,E)
    float* dlogits_;      // (N,E); idle in forward, where it stages the bias and the kept
                          // counts (E each) in the device's memory
    float* dweights_;     // (N,k)
    float* dexpert_out_;  // (N·k, C)
    float* ddispatched_;  // (N·k, C)
    float* dreceived_out_ = nullptr;  // (Re, C) under ep: the output gradients received
    float* dreceived_ = nullptr;      // (Re, C) under ep: the input gradients sent back
    float* dglu_;         // (Re, Fe); the shared experts' (N, S·Fe) reuse it when wider
    float* expert_tensor_sum_ = nullptr;  // (N, C) under --etp: the partial sums all-reduced over it
    float* dgate_;        // likewise
    float* dup_;          // likewise
};

}  // namespace parbench

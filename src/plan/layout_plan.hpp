// One layout of one model on one cluster, predicted: memory per GPU by category on the most
// loaded rank (under a named byte convention), traffic per step per parallel dimension, the
// pipeline bubble (formula and simulated schedule), and the step time built from them:
//
//   step = compute + bubble + optimizer + exposed communication (tp + dp + pp)
//   compute   = with a GPU device's compute model (plan/device_compute.hpp): micro-batches x the
//               busiest pipeline rank's F + B + W + recompute, each from its GEMMs on the device's
//               curve and its element-wise bytes at HBM bandwidth (plan/stage_compute.hpp);
//               else (model FLOPs + recompute FLOPs, theory/model_flops.hpp) / (GPUs x rate x share),
//               share = cores / ranks on a host whose ranks outnumber its cores, else 1
//   bubble    = compute x b / (1 - b), b the simulated schedule's idle fraction
//   optimizer = AdamW's 28 B per owned parameter / (memory bandwidth x share) (unless the rate
//               is a train report's, which holds it already)
//   exposed   = tp: every collective (train's are blocking), or with --tp-comm-overlap each
//               all-gather and reduce-scatter pipelined with its GEMM (plan/tp_comm_overlap.hpp); cp: every transfer of the
//               context-parallel attention (alltoall's are blocking; ring overlaps its sends
//               with block compute, so for ring this is an upper bound); dp: all of it, or with --overlap
//               what the backward cannot hide, at least the last bucket; ZeRO-3 with --prefetch
//               and --overlap per layer (zero3_exposed_ms: the next layer's gather behind this
//               layer's compute and no more; each micro-batch's first gathers and the step's last
//               reduce-scatter exposed; DeepSpeed's re-gathers under full recompute with
//               --states zero, theory/traffic.hpp); pp: the fill and
//               drain transfers (2(p-1)) with non-blocking p2p, every transfer with blocking (a
//               receive is the other end of its peer's send and takes no time of its own)
//   compute under ZeRO-3 in a framework's convention also holds FSDP2's copies: each gather's
//               unsharded parameters copied out of the all-gather buffer, each reduce-scatter's
//               gradients copied into its input (torch/distributed/fsdp/_fully_shard/
//               _fsdp_collectives.py, foreach_all_gather_copy_out and foreach_reduce: per-parameter
//               sharding has no flat buffer to gather into), each read and written once at HBM speed
//   + overlap slowdown: with a GPU's compute model, the compute beside each hidden collective
//               (dp with --overlap, ZeRO-3's prefetched gathers, non-blocking pipeline sends) runs
//               overlap_compute_slowdown slower: NCCL's kernels take SMs and HBM bandwidth
//   MFU = model FLOPs / (step x GPUs x peak);  tokens/s = global batch x seq / step
//   MoE (--ep, plan/moe_plan.hpp): + exposed ep (every all-to-all; with --moe-a2a-overlap-1f1b the
//   most exposed stage's, its paired 1F1B steps hiding what the partner pass's compute covers);
//   model FLOPs on the active parameters (router, k + S experts per token), so the MFU is on
//   active parameters
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "plan/alpha_beta.hpp"
#include "plan/cluster.hpp"
#include "plan/compute_calibration.hpp"
#include "plan/device_compute.hpp"
#include "plan/host_contention.hpp"
#include "plan/host_overlap.hpp"
#include "plan/moe_plan.hpp"
#include "plan/stage_compute.hpp"
#include "plan/state_rules.hpp"
#include "theory/activation_memory.hpp"
#include "theory/layer_work.hpp"
#include "theory/memory.hpp"
#include "theory/rank_traffic.hpp"

namespace parbench {

// Model-state bytes per GPU for `parameters` on this rank under a convention (zero or
// megatron), partitioned over dp by the ZeRO stage (1: optimizer, 2: + gradients,
// 3: + parameters; Megatron's distributed optimizer is stage 1).
struct ModelStateBytes {
    double params = 0, grads = 0, optimizer = 0;
    double total() const { return params + grads + optimizer; }
    std::string rule;
};
ModelStateBytes model_state_bytes(StateConvention states, double parameters, int zero, int dp);

// How much slower a GPU computes while a collective runs beside it: 18.9 % on average (40 % at
// most) over GPT and Llama training on A100, H100, MI250 and MI210, against the same compute
// alone ("Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep
// Learning: Performance and Power Implications", arXiv 2507.03114, abstract). The average is taken for
// every device preset; it is charged on as much compute as the hidden collectives last.
inline constexpr double overlap_compute_slowdown = 0.189;

struct PlanLayout {
    // The layout (theory/layout.hpp) as the engine's formulas count it: under --states parbench
    // the model itself; under the frameworks' conventions a mixture-of-experts model's dense
    // skeleton (plan/moe_plan.hpp), the model itself in experts.model. Its attention is the
    // convention's (flash: no s x s scores kept, recomputed in backward, theory/layer_work.hpp;
    // naive: kept unless recompute drops them); the command defaults to flash for bf16 on a GPU
    // device.
    Layout engine;
    StateConvention states = StateConvention::parbench;
    // ZeRO-3 as FSDP runs it (arXiv 2304.11277 sec. 3.2): `reshard_after_forward` false keeps the
    // gathered parameters from forward to backward (one gather per layer, not two; the whole
    // model's 16-bit parameters held at the peak); `shard_group` > 0 shards the states over that
    // many ranks inside a host and replicates them across hosts (hybrid sharding), the gradient
    // shards all-reduced across the replicas once per step. zero and megatron conventions only.
    bool reshard_after_forward = true;
    int shard_group = 0;  // 0: all dp ranks
    // FP8 linear layers (Transformer Engine's recipe, torchtitan's Float8; plan/device_compute.hpp):
    // their GEMMs at the device's FP8 curve, and an FP8 copy of each weight and of its transpose
    // (1 B each per parameter), which Transformer Engine keeps from a step's first micro-batch to
    // its last (its is_first_microbatch weight caching). zero and megatron conventions, bf16.
    bool fp8 = false;
    // --tp-comm-overlap's GEMMs beside pipelined and bulk collectives: on the SMs the
    // communication leaves (Transformer Engine 2.0 on: initialize_ub's default set_sm_margin for
    // pipeline and bulk), or on every SM, sharing them with the communication kernels (TE before
    // 2.0, whose default was set_sm_margin 0; Megatron-LM passes no userbuffers config without
    // --tp-comm-overlap-cfg): then the tp time those collectives hide on SMs slows the compute
    // beside it as the other hidden collectives do (plan/tp_comm_overlap.hpp).
    bool tp_comm_sm_margin = true;
    // A dense Llama job's norms, RoPE and SwiGLU as eager PyTorch runs them, op by op (plan --eager:
    // torchtitan without torch.compile; theory/layer_work.hpp); zero and megatron conventions.
    bool eager_elementwise = false;
    PlanExperts experts;
};

struct PlanMemory {
    int pp_rank = 0;
    double params = 0, grads = 0, optimizer = 0, activations = 0;
    double buffers = 0;  // included in the categories above (parbench) or beside them (zero, megatron)
    double total = 0;
    std::string convention;  // the byte rule per category
    std::string activation_formula;
    // zero, megatron: one layer's activations per micro-batch under the convention's formula
    // (0 for parbench, whose activations are counted per buffer)
    double activation_bytes_per_layer = 0;
    std::vector<MemoryItem> items;  // parbench: every buffer
};

struct CommLine {
    std::string dimension;  // "tp", "dp" (dp x cp ranks under context parallelism), "pp", "cp"
    std::string collective;
    double calls = 0, bytes = 0;
    int group = 1;
    Placement placement = Placement::intra_host;
    double time_ms = 0;
    std::string source;
};

struct PlanPrediction {
    PlanLayout layout;
    PlanMemory memory;
    std::vector<CommLine> comm;
    // Per pipeline rank (one entry without a pipeline), by dimension, in train's byte
    // convention (fp32, as its counters count): theory/rank_traffic.hpp, exactly what train
    // expects and measures on that rank; `comm` scales these to the convention's wire bytes.
    std::vector<std::map<std::string, TrafficByOp>> traffic_by_pp_rank;
    // Per pipeline rank (one without a pipeline): the compute passes of a step, F, B and W, as
    // the schedule runs them (theory/pipeline/schedule.hpp) and train's engine counts them.
    std::vector<PassCounts> passes_by_pp_rank;
    double bubble_formula = 0, bubble_simulated = 0;
    std::string bubble_formula_text;
    double flops_per_step = 0;
    ComputeShare compute_share;  // oversubscribed hosts: compute and optimizer at share x the rate
    // Per pipeline rank, the compute slowdown of its CPU host's busy cores (plan/host_contention.hpp);
    // empty when not calibrated. And whether the host leaves nothing to overlap on (plan/host_overlap.hpp).
    std::vector<double> contention_by_pp_rank;
    HostOverlap host_overlap;
    double compute_ms = 0, bubble_ms = 0, optimizer_ms = 0;
    // With a device's compute model: every pipeline rank's work per micro-batch (the busiest
    // sets compute_ms), and the FLOPs the step runs, recompute included (HFU's numerator).
    std::vector<StageCompute> stages;
    double hardware_flops_per_step = 0;
    double exposed_tp_ms = 0, exposed_dp_ms = 0, exposed_pp_ms = 0, exposed_cp_ms = 0;
    double exposed_ep_ms = 0;  // MoE: every all-to-all (plan/moe_plan.hpp)
    // A GPU's compute slows while a collective it hides runs beside it (overlap_compute_slowdown).
    double overlap_slowdown_ms = 0;
    // ZeRO-3 in a framework (FSDP2): its per-parameter sharding copies, part of compute_ms.
    double fsdp_copy_ms = 0;
    MoePrediction moe;
    double step_ms = 0, tokens_per_s = 0, mfu = 0;  // MoE: MFU on the active parameters' FLOPs
    double memory_capacity = 0;  // what the layout may use: the HBM less memory_reserved
    double memory_reserved = 0;  // the allocator's and runtime's share (zero, megatron conventions)
    bool fits = true;
    double exposed_ms() const { return exposed_tp_ms + exposed_dp_ms + exposed_pp_ms + exposed_cp_ms + exposed_ep_ms; }
};

struct PlanContext {
    ClusterSpec cluster;
    CommModel comm;
    ComputeRate rate;
    PassCosts pass_costs;          // F/B/W times for the schedule simulation
    bool pass_costs_given = false; // else the schedule's balanced costs
    // Simulate even with balanced costs (where the simulation equals the formula); --search
    // turns it off to stay fast over thousands of layouts.
    bool simulate_balanced = true;
    // The device's GEMM curve and memory bandwidth: compute time from each layer's work
    // (plan/stage_compute.hpp). Without it, model FLOPs (plus recompute's) at `rate`.
    std::optional<DeviceCompute> device_compute;
    // A CPU host's cores shared by ranks computing at once (--calibrate-compute-busy).
    HostContention contention{};
};

// `pipeline`: the layout's engine_pipeline when the caller has it already (a search shares one
// per schedule shape); built here otherwise.
PlanMemory plan_memory(const PlanLayout& layout, const EnginePipeline* pipeline = nullptr);
// A floor of plan_memory(layout).total that needs no schedule: the most model states any pipeline
// rank holds (parameters, gradients, optimizer state; the schedule changes only what else it
// holds). 0 where it is not computed (a mixture of experts under a framework's convention).
double plan_memory_floor(const PlanLayout& layout);
// The allocator's and runtime's share of a device a layout cannot use (frameworks' conventions;
// parbench's counts its engine's own buffers), and what is left for it.
double plan_memory_reserved(const PlanLayout& layout, const ClusterSpec& cluster);
double plan_memory_capacity(const PlanLayout& layout, const ClusterSpec& cluster);
// `memory`: plan_memory's answer for it when the caller has it already (a search checks the fit first).
PlanPrediction predict_layout(const PlanLayout& layout, const PlanContext& context,
                              const EnginePipeline* pipeline = nullptr, const PlanMemory* memory = nullptr);

// Layers of activations Megatron-LM's interleaved schedule holds at its peak on `pp_rank`
// (L (1 + (p - 1) / (p v)) on rank 0, arXiv 2205.05198 sec. 4.2.3); `engine_layers` when the
// layers do not split evenly into p x v chunks. --states zero|megatron count these.
double megatron_interleaved_layers_in_flight(int layers, int p, int v, int m, int pp_rank, double engine_layers);

// ZeRO-3 / FSDP with prefetch and overlap, per unit (layer): the dp time compute cannot hide,
// from the step's gather and reduce-scatter totals and calls and its forward and backward compute,
// over `microbatches` forward-backward passes (each one's first gathers exposed), with
// `backward_regather_ms` of gathers the backward adds (DeepSpeed's under full recompute,
// theory/traffic.hpp) sharing its link.
double zero3_exposed_ms(double gather_ms, double gather_calls, double reduce_ms, double reduce_calls,
                        double forward_ms, double backward_ms, bool reshard_after_forward = true,
                        int microbatches = 1, double backward_regather_ms = 0.0);

nlohmann::json to_json(const PlanPrediction& prediction);
std::string layout_label(const PlanLayout& layout);

}  // namespace parbench

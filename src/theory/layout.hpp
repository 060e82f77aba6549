// The layout a model is trained (`train`) or planned (`plan`) under, as one value: the degrees,
// the splits, the pipeline and batch, the data-parallel scheme, what is kept in memory and the
// mixture-of-experts options, with the groups and sizes derived from them (as torchtitan's
// ParallelDims and Megatron-core's ModelParallelConfig hold theirs). The engine runs it
// (train/), the formulas count it (theory/memory.hpp, theory/rank_traffic.hpp) and plan prices
// it (plan/), so all three see one layout.
//
// It is resolved and checked by one function, resolve_layout, from the flags as the user gave
// them (LayoutFlags; cli/layout_flags.cpp declares each flag once for every command that takes a
// layout), so train and plan refuse the same layout with the same line, each line naming the
// flags as given and the fix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "theory/activation_memory.hpp"
#include "theory/context_split.hpp"
#include "theory/engine_defaults.hpp"
#include "theory/expert_parallel.hpp"
#include "theory/layer_work.hpp"
#include "theory/model_config.hpp"
#include "theory/model_layout.hpp"
#include "theory/pipeline/schedule.hpp"
#include "theory/pipeline/schedule_simulation.hpp"
#include "theory/precision.hpp"
#include "theory/scheme_settings.hpp"
#include "theory/tensor_split.hpp"

namespace parbench {

// The ranges of the layout flags: beyond any job run, and small enough that every product formed
// from them is exact and every table built from them (a schedule of pp x micro-batches x virtual
// stages) is bounded.
namespace layout_limits {
inline constexpr std::int64_t max_ranks = 1 << 20;  // any degree, and dp x tp x pp x cp
inline constexpr std::int64_t max_microbatches = 1 << 16;
inline constexpr std::int64_t max_schedule_slots = std::int64_t{1} << 20;
inline constexpr std::int64_t max_global_batch = std::int64_t{1} << 30;
inline constexpr double max_bucket_mib = 1 << 20;
}  // namespace layout_limits

// The mixture-of-experts options (Megatron-core's flag names and meanings); a model with "moe"
// only. The MoE layers run them (train/moe/moe_layer.hpp).
struct MoeSettings {
    std::optional<double> capacity_factor;  // --moe-expert-capacity-factor; unset: dropless
    double aux_loss_coeff = 0.0;            // --moe-aux-loss-coeff (alpha)
    double bias_update_rate = 0.0;          // --moe-router-bias-update-rate (u); 0: no bias
    bool a2a_overlap = false;               // --moe-a2a-overlap: dispatch/combine in two overlapped halves
    // --moe-a2a-overlap-1f1b: 1F1B's steady-state forward and backward paired, one micro-batch's
    // dispatch/combine under the other's pass (theory/moe_a2a_overlap_1f1b.hpp)
    bool a2a_overlap_1f1b = false;
};

// The layout flags as the user gave them. Unset optionals take the command's default
// (LayoutTarget), so that a message can say where a value came from.
struct LayoutFlags {
    // Degrees
    std::optional<int> dp;  // default: what the world leaves after tp x pp x cp
    int tp = 1;
    int pp = 1;
    int cp = 1;
    std::optional<int> ep;   // default 1
    std::optional<int> etp;  // default: tp for an MoE model planned as a framework runs it (LayoutTarget::engine false), else 1
    // Splits
    bool sp = false;
    std::string tp_style = "megatron";
    std::optional<std::string> cp_style;    // ring (default) or alltoall; only with cp > 1
    std::optional<std::string> cp_balance;  // zigzag (default) or none; only with cp > 1
    // Pipeline and batch
    std::string schedule = "1f1b";
    int virtual_stages = 1;
    std::vector<int> stage_layers;  // empty: balanced
    std::string p2p = "nonblocking";
    int microbatches = 1;
    std::optional<int> global_batch;  // default: LayoutTarget::default_global_batch
    // Data-parallel scheme
    int zero = 0;
    std::optional<double> bucket_mb;  // default: default_bucket_bytes (theory/memory.hpp)
    bool overlap = false;
    bool prefetch = false;
    bool tp_comm_overlap = false;  // a framework's overlap of tp collectives with GEMMs (plan only)
    // Memory
    std::string recompute = "none";
    std::optional<std::string> attention;  // auto, flash or naive; unset: auto
    std::optional<std::string> precision;  // default: LayoutTarget::default_precision
    // Mixture of experts
    std::optional<double> moe_capacity_factor;
    double moe_aux_loss_coeff = 0.0;
    double moe_bias_update_rate = 0.0;
    bool moe_a2a_overlap = false;
    bool moe_a2a_overlap_1f1b = false;
};

struct Layout {
    // What is laid out: the model (plan's frameworks' conventions count an MoE model on its dense
    // skeleton, plan/moe_plan.hpp) and its sequence length.
    ModelConfig model;
    int seq_len = 1;

    // Degrees. The mesh is pp x dp x cp x tp, tp innermost (train/mesh.hpp); the expert-parallel
    // group is ep consecutive ranks of the dp x cp group, and etp, the routed experts' tensor
    // parallelism, 1 or tp (theory/expert_parallel.hpp).
    int dp = 1;
    int tp = 1;
    int pp = 1;
    int cp = 1;
    int ep = 1;
    int etp = 1;

    // Splits: Megatron's sequence parallelism inside the tp group, the tensor-parallel style (MLP
    // models may all-gather), and how context parallelism attends and balances the causal work.
    bool sp = false;
    TensorParallelStyle tp_style = TensorParallelStyle::megatron;
    ContextStyle cp_style = ContextStyle::ring;
    ContextBalance cp_balance = ContextBalance::zigzag;

    // Pipeline and batch: the schedule, its chunks per rank, each virtual stage's layers (pp > 1,
    // theory/pipeline/partition.hpp), the transfers, and the global batch in dp x micro-batches
    // of microbatch_size samples.
    ScheduleKind schedule = ScheduleKind::one_f_one_b;
    int virtual_stages = 1;
    std::vector<LayerRange> stage_ranges;
    P2pMode p2p = P2pMode::nonblocking;
    int microbatches = 1;
    int global_batch = 1;
    int microbatch_size = 1;  // samples per micro-batch on one rank

    // The data-parallel scheme: the ZeRO stage, the gradient bucket and where its size came from,
    // overlap of the bucket collectives with backward, and ZeRO-3's prefetch.
    int zero = 0;
    std::size_t bucket_bytes = 25u << 20;
    std::string bucket_source;  // "--bucket-mb" or the default's rule (theory/memory.hpp)
    bool overlap = false;
    bool prefetch = false;
    // Tensor-parallel all-gathers and reduce-scatters (sequence parallelism) pipelined with the
    // GEMMs beside them, as Megatron-core's --tp-comm-overlap (Transformer Engine's userbuffers)
    // and torchtitan's async TP run them (plan/tp_comm_overlap.hpp prices it); parbench's engine
    // runs its collectives blocking, so train refuses it.
    bool tp_comm_overlap = false;

    // Memory: what each layer keeps (arXiv 2205.05198 sec. 5), the whole-sequence attention
    // without context parallelism (theory/engine_attention.hpp), the matmuls' precision.
    Recompute recompute = Recompute::none;
    AttentionKind attention = AttentionKind::naive;
    Precision precision = Precision::fp32;

    MoeSettings moe;

    // Derived groups and sizes.
    int world() const { return dp * tp * pp * cp; }
    // The ranks gradients are averaged over: dp x cp (train/mesh.hpp).
    int gradient_ranks() const { return dp * cp; }
    // Tokens of one sequence on each rank of a context-parallel group.
    int local_seq_len() const { return seq_len / cp; }
    ContextSplit context_split(int cp_rank = 0) const { return ContextSplit{cp_rank, cp, cp_style, cp_balance}; }
    TensorSplit tensor_split(int tp_rank = 0) const { return TensorSplit{tp_rank, tp, sp, tp_style}; }
    // The routed experts a rank of tp coordinate `tp_rank` holds: ep rank 0's (every rank of an
    // ep group holds as many), split over tp when etp > 1.
    ExpertSplit expert_split(int tp_rank = 0) const {
        return etp > 1 ? ExpertSplit{0, ep, tp_rank, etp} : ExpertSplit{0, ep};
    }
    ScheduleShape schedule_shape() const { return ScheduleShape{pp, microbatches, virtual_stages}; }
    // The data-parallel scheme's settings (AdamW's constants at their defaults).
    SchemeSettings scheme() const {
        SchemeSettings settings;
        settings.zero_stage = zero;
        settings.bucket_bytes = bucket_bytes;
        settings.overlap = overlap;
        settings.prefetch = prefetch;
        settings.microbatches = microbatches;
        return settings;
    }
};

// Where the world's size comes from, for the message: train's ranks (mpirun -np), plan's GPUs
// (--gpus).
struct WorldSize {
    int count = 1;
    std::string noun;    // "ranks", "GPUs"
    std::string source;  // "mpirun -np", "--gpus"
};

// Who resolves a layout, and what the flags that were not given mean there.
struct LayoutTarget {
    // parbench's own engine runs the layout (train; plan --states parbench): its limits apply
    // (the pipeline's, no multi-head latent attention), it chooses the attention as train does,
    // and the experts stay whole (etp 1) unless --etp says otherwise. Otherwise a framework's
    // job is planned (plan --states zero|megatron): etp defaults to tp, as Megatron-core's.
    bool engine = true;
    // The world the degrees must fill; unset while unknown (train before MPI starts), when the
    // world-dependent rules (dp, the global batch's split, ep against dp x cp) wait.
    std::optional<WorldSize> world;
    // plan --search chooses dp, tp, pp, the micro-batches and ep itself: only the flags' own rules
    // are checked, and dp is 1 in the base layout.
    bool degrees_searched = false;
    // engine: whether the backend's block attention kernels tile (a CPU's; a GPU's do not).
    bool block_attention_tiles = true;
    // Not engine: what --attention auto (or no --attention) means: flash for bf16 jobs on GPUs.
    AttentionKind auto_attention = AttentionKind::naive;
    Precision default_precision = Precision::fp32;
    // Without --global-batch: this many sequences, or one per micro-batch per dp rank (unset);
    // the note says where the default came from, in messages.
    std::optional<int> default_global_batch = engine_default_global_batch;
    std::string default_global_batch_note;
};

// Every number flag of the layout in its range (core/checked.hpp), UsageError naming it: the
// first thing resolve_layout checks, and what a command checks before it forms a product of
// the degrees itself (plan's default --gpus).
void check_layout_flag_ranges(const LayoutFlags& flags);

// The layout of `model` at `seq_len` tokens the flags give for `target`; UsageError naming the
// flags and the fix for anything out of range, contradictory or not dividing as it must.
Layout resolve_layout(const LayoutFlags& flags, const ModelConfig& model, int seq_len, const LayoutTarget& target);

}  // namespace parbench

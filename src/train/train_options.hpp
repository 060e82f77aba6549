// `parbench train` options as a value, and the checks that turn impossible requests into
// one UsageError naming the flags and the fix: first what can be checked before MPI starts,
// then (resolve_layout) what needs the world size.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "theory/engine_defaults.hpp"
#include "theory/expert_parallel.hpp"
#include "theory/layout_check.hpp"
#include "theory/memory.hpp"
#include "theory/model_config.hpp"
#include "theory/pipeline/partition.hpp"
#include "theory/pipeline/schedule.hpp"
#include "theory/pipeline/schedule_simulation.hpp"
#include "train/context/context_attention.hpp"
#include "train/mesh.hpp"
#include "train/model.hpp"
#include "train/schemes/scheme.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {

struct TrainOptions {
    std::string model = "gpt-tiny";
    int global_batch = engine_default_global_batch;
    std::optional<int> seq;
    int steps = 10;
    int warmup = 3;
    std::uint64_t seed = 1234;
    double lr = 1e-3;
    std::optional<int> dp;  // default: whatever the world leaves after tp and pp
    int tp = 1;
    bool sp = false;                    // Megatron sequence parallelism inside the tp group
    std::string tp_style = "megatron";  // or "allgather" (MLP only)
    int pp = 1;
    std::string schedule = "1f1b";    // pipeline schedule (pp > 1)
    int virtual_stages = 1;           // chunks per pipeline rank (interleaved)
    std::vector<int> stage_layers;    // layers per (virtual) stage; empty: balanced
    std::string p2p = "nonblocking";  // pipeline transfers: nonblocking or blocking
    bool print_schedule = false;      // print the schedule and exit, without MPI
    std::string trace_path;           // Chrome trace of every rank's timeline
    int zero = 0;
    int microbatches = 1;
    std::optional<double> bucket_mb;  // default: theory/memory.hpp default_bucket_bytes
    bool overlap = false;
    bool prefetch = false;
    std::string precision = engine_default_precision;
    std::string recompute = "none";  // none, selective or full (arXiv 2205.05198 sec. 5)
    // The whole-sequence attention (theory/engine_attention.hpp): auto, flash (block) or naive.
    std::string attention = "auto";
    // Context parallelism (train/context/context_attention.hpp): cp ranks split every sequence.
    // The style and balance are optional so that giving them without --cp > 1 can be refused.
    int cp = 1;
    std::optional<std::string> cp_style;    // ring (default) or alltoall
    std::optional<std::string> cp_balance;  // zigzag (default) or none
    // Mixture of experts (a config with "moe"; Megatron-core's flag names and meanings).
    int ep = 1;  // expert-parallel degree, carved from dp x cp (theory/expert_parallel.hpp)
    int etp = 1;  // the experts' tensor parallelism: 1, or tp (over the tp group; theory/expert_parallel.hpp)
    std::optional<double> moe_capacity_factor;  // unset: dropless
    double moe_aux_loss_coeff = 0.0;
    double moe_bias_update_rate = 0.0;  // 0: no aux-loss-free balancing bias
    bool moe_a2a_overlap = false;       // dispatch/combine in two halves overlapped with compute (needs ep > 1)
    bool moe_a2a_overlap_1f1b = false;  // one micro-batch's dispatch/combine under another's pass (1F1B, pp > 1)
    std::optional<double> peak_tflops;
    bool check = false;
    std::string json_path;
    std::string backend = "auto";
    // Testing: world rank that sleeps testing_slow_ms in every step, outside communication
    // (-1: none), so that the straggler report can be shown to name it.
    int testing_slow_rank = -1;
    double testing_slow_ms = 20.0;
    // Testing: world rank that draws the samples after its own (-1: none): a planted data-sharding
    // error, which --check must find (the serial reference draws the right ones).
    int testing_misread_rank = -1;
};

// Everything the flags determine without knowing the world.
struct TrainPlan {
    TrainOptions options;
    ModelConfig model;
    int seq_len = 1;
    SchemeSettings scheme;
    Recompute recompute = Recompute::none;
    // --attention resolved; for the backend's kernels only by with_backend_attention.
    AttentionKind attention = AttentionKind::naive;
    std::string bucket_source;  // "--bucket-mb" or the default's rule (theory/memory.hpp)
    TensorParallelStyle tp_style = TensorParallelStyle::megatron;
    // Pipeline parallelism (options.pp > 1): the schedule, transfers and each virtual
    // stage's layers (train/pipeline/).
    ScheduleKind schedule = ScheduleKind::one_f_one_b;
    P2pMode p2p = P2pMode::nonblocking;
    std::vector<LayerRange> stage_ranges;
    // Context parallelism (options.cp > 1).
    ContextStyle cp_style = ContextStyle::ring;
    ContextBalance cp_balance = ContextBalance::zigzag;
    MoeSettings moe;  // from the --moe-* flags (a model with "moe" only)
    // Tokens of one sequence on each rank of a context-parallel group: seq_len / cp.
    int local_seq_len() const { return seq_len / options.cp; }
    ContextSplit context_split(int cp_rank) const { return ContextSplit{cp_rank, options.cp, cp_style, cp_balance}; }
    // Samples in one micro-batch of a rank among `dp` data-parallel ranks (resolve_layout has
    // checked that the global batch splits into dp x microbatches).
    int microbatch_size(int dp) const { return options.global_batch / dp / options.microbatches; }
    ScheduleShape schedule_shape() const { return ScheduleShape{options.pp, options.microbatches, options.virtual_stages}; }
    // This rank's split for its coordinate in a tensor-parallel group of options.tp.
    TensorSplit tensor_split(int tp_rank) const {
        return TensorSplit{tp_rank, options.tp, options.sp, tp_style};
    }
};

// Throws UsageError; reads the model config (so a bad config fails before MPI starts).
TrainPlan resolve_train_options(const TrainOptions& options);
// The plan with its whole-sequence attention chosen for a backend whose block kernels tile or
// not (Ops::tiles_block_attention); UsageError for --attention flash where they do not.
TrainPlan with_backend_attention(TrainPlan plan, bool backend_tiles_block_attention);
// UsageError for what the backend has not run: --moe-a2a-overlap-1f1b on a GPU, whose paired
// exchange shares one NCCL communicator with the partner pass's blocking collectives.
void check_backend_moe_overlap_1f1b(const TrainPlan& plan, bool gpu);
// The mesh for a world of `world_size` ranks; UsageError when the degrees do not fit it or
// the global batch does not split into dp x microbatches.
MeshShape resolve_layout(const TrainPlan& plan, int world_size);

nlohmann::json to_json(const TrainOptions& options);

// The layout `train` runs for these resolved options on this mesh.
EngineLayout engine_layout(const TrainPlan& plan, const MeshShape& mesh);

}  // namespace parbench

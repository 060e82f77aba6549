// The rules a layout's factors must keep, checked in one place for `train` and `plan` so that
// the two refuse the same layouts with the same words. Each throws UsageError naming the flag
// and the fix; each rule has one message, whichever command states it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "theory/activation_memory.hpp"
#include "theory/context_split.hpp"
#include "theory/model_config.hpp"
#include "theory/model_layout.hpp"
#include "theory/pipeline/schedule.hpp"
#include "theory/pipeline/schedule_simulation.hpp"
#include "theory/tensor_split.hpp"

namespace parbench {

// The degrees and the flags that depend on them alone: each degree at least 1, ZeRO's stage,
// --sp and --tp-style allgather needing a tensor-parallel group, --prefetch needing ZeRO-3.
void check_degrees(int tp, int pp, int cp, int zero, int microbatches, bool sp, bool prefetch,
                   TensorParallelStyle style);

// Tensor parallelism over `tp` ranks (with sequence parallelism when `sp`, in `style`) of
// `model`, whose ranks hold `local_seq` tokens of each sequence (seq / cp under context
// parallelism over `cp` ranks): every split must come out even.
void check_tensor_split(const ModelConfig& model, int tp, bool sp, TensorParallelStyle style, int local_seq, int cp);

ContextStyle parse_context_style(const std::string& name);      // UsageError naming --cp-style
ContextBalance parse_context_balance(const std::string& name);  // UsageError naming --cp-balance
// A sequence of `seq_len` tokens cut into cp chunks (balance none) or 2 cp (zigzag).
void check_context_sequence(int seq_len, int cp, ContextBalance balance);

struct ContextRequest {
    int cp = 1;
    std::optional<std::string> style, balance;  // --cp-style, --cp-balance as given
};
struct ContextChoice {
    ContextStyle style = ContextStyle::ring;
    ContextBalance balance = ContextBalance::zigzag;
};
// Context parallelism over cp ranks (train/context/context_attention.hpp): a sequence to split,
// split evenly, and the style and balance flags only with cp > 1.
ContextChoice check_context_parallel(const ModelConfig& model, int seq_len, const ContextRequest& request);

struct PipelineRequest {
    int pp = 1;
    ScheduleKind schedule = ScheduleKind::one_f_one_b;
    P2pMode p2p = P2pMode::nonblocking;
    int virtual_stages = 1;
    std::vector<int> stage_layers;  // --stage-layers, empty for balanced stages
    int microbatches = 1;
    int zero = 0;
    bool overlap = false, prefetch = false, sp = false;
    Recompute recompute = Recompute::none;
    // What parbench's own engine runs (train, and plan --states parbench): no ZeRO-2/3, no
    // mid-step buckets, no deferred weight gradients of gathered or recomputed layers with a
    // pipeline. Frameworks' conventions (plan --states zero|megatron) model those.
    bool engine = true;
};
// The pipeline's stages, schedule and micro-batches; the layer ranges of its virtual stages
// (empty without a pipeline).
std::vector<LayerRange> check_pipeline(const ModelConfig& model, const PipelineRequest& request);

// Where the world's size comes from, for the message: train's ranks (mpirun -np), plan's GPUs
// (--gpus).
struct WorldSize {
    int count = 1;
    std::string noun;    // "ranks", "GPUs"
    std::string source;  // "mpirun -np", "--gpus"
};
// dp x tp x pp x cp must be the world; without --dp, dp fills it. Returns dp.
int check_world(std::optional<int> dp, int tp, int pp, int cp, const WorldSize& world);

// The global batch in dp x micro-batches equal micro-batches; `note` says where a default batch
// came from ("" when given).
void check_global_batch(int global_batch, int dp, int microbatches, const std::string& note = "");

}  // namespace parbench

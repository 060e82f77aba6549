// What one rank of parbench's own `train` allocates, from the model, the layout and the flags
// alone: every buffer the engine takes from its memory ledger (train/memory_ledger.hpp),
// listed by what it is, so that the report's theory column and `parbench plan`'s prediction
// are one formula and equal the measured ledger. It is the sum of the buffer tables the engine
// allocates from (llm.c's size table), named and grouped into the report's items: the MLP's
// (theory/mlp_buffers.hpp), the GPT and Llama layers' stores, stashes and scratch
// (gpt_buffers.hpp, llama_buffers.hpp), the transformer frame around them
// (transformer_buffers.hpp), the MoE layer's (moe_buffers.hpp) and the bf16 operand copies
// (matmul_buffers.hpp), times how many of each the layout holds: layers, micro-batches, and
// the pipeline pool's slots, stores and heads (theory/pipeline/partition.hpp's
// activation_pool, which the engine sizes its pool by). Three counts are still composed here
// beside the engine rather than read from a table it allocates from: the data-parallel
// schemes' states (train/schemes/data_parallel.cpp, zero.cpp; their buckets, shards and slot
// counts are the very functions the schemes call: group_units_by_bytes, FlatLayout,
// zero_gradient_slots, zero_gather_slots), the tied-embedding gradient scratch of
// train/pipeline/pipeline_executor.cpp, and the context-parallel and block attention's saved
// state and workspace (theory/context_parallel.hpp's and engine_attention.hpp's formulas beside
// train/context/ and train/ops/sequence_attention.hpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "theory/activation_memory.hpp"
#include "theory/layer_work.hpp"
#include "theory/layout.hpp"
#include "theory/memory_category.hpp"
#include "theory/model_config.hpp"
#include "theory/mlp_buffers.hpp"
#include "theory/model_layout.hpp"
#include "theory/pipeline/schedule.hpp"
#include "theory/pipeline/schedule_simulation.hpp"
#include "theory/precision.hpp"
#include "theory/tensor_split.hpp"

namespace parbench {

// `count` buffers of `bytes_each` under `category`, named for what they hold.
struct MemoryItem {
    MemoryCategory category = MemoryCategory::params;
    std::string name;
    double count = 1.0;
    double bytes_each = 0.0;
    bool buffer = false;  // a scheme's working buffer (bucket or gather slot, staging shard, exchange scratch)
    double bytes() const { return count * bytes_each; }
};

struct RankMemory {
    int pp_rank = 0;  // the pipeline stage (all tensor- and data-parallel ranks of it are alike)
    std::vector<MemoryItem> items;
    double of(MemoryCategory category) const;
    double total() const;  // the ledger allocates everything up front: its peak is the sum
};

// The parameters a pipeline rank holds (its tensor-parallel shard of its stages' units) and
// its pipeline part (chunks, activation slots), as the engine builds them.
struct EngineRank {
    ParameterLayout layout;
    PipelinePart part;
};
// The schedule of a pipelined layout, every rank's peak micro-batches in flight and its passes, built once
// (a plan asks for every rank of it; the schedule has p x m actions per rank).
struct EnginePipeline {
    Schedule schedule;
    std::vector<std::vector<int>> in_flight;  // per rank, per chunk (schedule_simulation.hpp)
    std::vector<ChunkOccupancy> occupancy;    // per rank (schedule_simulation.hpp)
    std::vector<PassCounts> passes;           // per rank (schedule.hpp's pass_counts)
};
std::optional<EnginePipeline> engine_pipeline(const Layout& layout);
// `whole`: model_parameter_layout at the layout's tensor and expert split, when the caller has it
// (a plan asks for every pipeline rank of one layout).
EngineRank engine_rank(const Layout& layout, int pp_rank, const EnginePipeline* pipeline = nullptr,
                       const ParameterLayout* whole = nullptr);
// Pipeline rank `pp_rank`'s chunks (virtual stage c·pp + pp_rank for each chunk c).
std::vector<LayerRange> engine_rank_chunks(const Layout& layout, int pp_rank);
// The same without the schedule: the rank's parameters and chunks, no activation slots. What its
// model states need, which no schedule changes (a search rules out shapes on them before building
// a schedule of thousands of micro-batches).
EngineRank engine_rank_unscheduled(const Layout& layout, int pp_rank, const ParameterLayout* whole = nullptr);
// One pipeline rank's model states in its ledger (the schemes' parameters, gradients, AdamW state
// and their slots: engine_rank_memory's first items): a floor of its total under any schedule.
double engine_rank_state_bytes(const Layout& layout, int pp_rank);

// One pipeline rank's ledger. Throws UsageError for a model kind the engine cannot train.
RankMemory engine_rank_memory(const Layout& layout, int pp_rank, const EnginePipeline* pipeline = nullptr);
// The most loaded rank (largest total), as the train report shows it.
RankMemory engine_peak_memory(const Layout& layout);

// The gradient bucket for data parallelism when --bucket-mb is not given. DDP and ZeRO-1
// keep whole gradients, so the bucket only groups their collectives: 25 MiB (PyTorch DDP's
// bucket_cap_mb). ZeRO-2 holds a bucket's full gradient in 2-3 slots beside the 1/dp shard
// (train/schemes/zero.cpp), so it saves gradient memory only when the bucket is small against the
// model: min(25 MiB, 1/4 of the rank's fp32 gradient bytes). (A bucket never splits a unit, so
// the slot is at least the largest layer.) ZeRO-3 buckets by layer and ignores it.
std::size_t default_bucket_bytes(int zero_stage, std::size_t parameters_per_rank);
std::string default_bucket_rule(int zero_stage);

}  // namespace parbench

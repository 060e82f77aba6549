// What one rank's parallel groups should carry per training step, from the model, the layout
// and the flags alone: the collectives and transfers by operation, in the byte convention
// Communicator::stats() counts (nccl-tests': the larger buffer of each call). `train` puts
// them beside what it measured (a correct implementation matches exactly) and `plan` uses them
// to predict a layout's traffic before it runs. Groups of one rank carry nothing.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "theory/activation_memory.hpp"
#include "theory/model_config.hpp"
#include "theory/parameter_layout.hpp"
#include "theory/scheme_settings.hpp"
#include "theory/tensor_split.hpp"

namespace parbench {

struct CollectiveVolume {
    double calls = 0.0;
    double bytes = 0.0;  // nccl-tests' size convention, as Communicator::stats() counts
};
// By operation: "allreduce", "allgather", "reducescatter", "send", "recv", "sendrecv".
using TrafficByOp = std::map<std::string, CollectiveVolume>;

// The part of the model a rank runs: all of it, or its pipeline chunks'.
struct ModelShare {
    int layers = 0;            // transformer blocks (GPT) or layers (MLP)
    bool first_stage = true;   // holds the embedding
    bool last_stage = true;    // holds the head and the loss
    int moe_layers = 0;        // of the layers, those with an MoE MLP (a config with "moe")
};
ModelShare whole_model_share(const ModelConfig& config);

// The tensor-parallel group, per step (every micro-batch's forward and backward), for a rank
// running `share` of the model. fp32 activations. With n = b·s·h elements of one
// (micro-batch, sequence, hidden) activation and r = b·s rows, per micro-batch, for a rank
// with l blocks, e = 1 when it holds the embedding and d = 1 when it holds the head:
//   GPT, TP:     all-reduce  (4l + e + d) x n  (per block 2 forward, 2 backward; the
//                            embedding's partial sums; the head's input gradient)
//                            + 3d x r (the vocab-parallel cross-entropy's max, sum-exp,
//                            target logit)
//   GPT, TP+SP:  all-gather     (6l + e + 2d) x n (per block: 2 forward, 2 backward of the
//                               reduce-scatters, 2 re-gathers of a split region's input for
//                               its weight gradient; embedding backward; head forward and
//                               re-gather)
//                reduce-scatter (4l + e + d) x n (per block 2 forward, 2 backward; embedding
//                               forward; head backward)
//                all-reduce     3d x r + l x 4h + d x 2h (cross-entropy; LayerNorm gradients)
//   MLP megatron: all-reduce of n per row-parallel layer forward and per column-parallel
//                layer but the first backward, + r when the last layer is column-parallel
//   MLP allgather: all-gather and reduce-scatter of n per layer but the last, + r (the loss)
//   Llama:       as GPT, with RMSNorm gains' gradients l x 2h + d x h under SP (no biases),
//                and, when tp does not divide kv_heads, l all-reduces of 2·h_kv·h (the
//                replicated Wk, Wv gradients)
//   --recompute full reruns each block's forward in backward, its collectives with it:
//                2l more all-reduces of n (TP), or 2l all-gathers and 2l reduce-scatters (SP)
//   MoE layers (moe of the l; run replicated over tp, on the rank's own rows under SP): 2
//                all-reduces fewer each (TP; 1 fewer under full recompute), or 3 all-gathers
//                and 2 reduce-scatters fewer and 1 all-reduce of the layer's gradient pack
//                (theory/moe_memory.hpp, `ep` setting its routed experts) (SP; 1 and 1 fewer
//                under full recompute)
// The whole model (l = L, e = d = 1) gives the unpipelined totals (4L + 2, 6L + 3, 4L + 2).
TrafficByOp tensor_parallel_traffic(const ModelConfig& config, int seq_len, int microbatch_size, int microbatches,
                                    const TensorSplit& split, const ModelShare& share,
                                    Recompute recompute = Recompute::none, int ep = 1);

// The expert-parallel group, per step, for a rank holding `share.moe_layers` MoE layers, as
// train's MoE layer (train/moe/moe_layer.cpp) exchanges its `tokens` rows per micro-batch (every
// tp rank routes all of them: the layer runs replicated over tp) over `ep` ranks, in fp32:
//   per MoE layer and forward: an alltoall of the rows per expert (E int32 in all), the
//     dispatch and the combine alltoallv; per backward the two mirrored (the output gradients
//     to the experts, the input gradients back); full recompute repeats the forward's three
//   alltoallv bytes as the communicator counts them, max(sent, received) elements per call:
//     under balanced dropless routing each rank sends and receives its tokens x top_k rows
//     of `hidden` floats. The routing moves that: dropless, a rank sends exactly that many and
//     receives between 0 and ep times as many, so train counts at least these bytes (at most ep
//     times them); capacity dropping sends fewer.
//   `alltoallv_parts` 2 under --moe-a2a-overlap: each alltoallv goes as two halves (each rank's
//     first and second half of its local experts, or of the source ranks when it holds one
//     expert), twice the calls, each of half the rows under balanced routing
TrafficByOp expert_parallel_traffic(const ModelConfig& config, double tokens, int microbatches, int ep,
                                    const ModelShare& share, Recompute recompute = Recompute::none,
                                    int alltoallv_parts = 1);

// The pipeline group, per step, for one pipeline rank: its chunks are the virtual stages
// `virtual_stages_held` of `virtual_stage_count`. Per micro-batch and chunk, one activation
// received (but on virtual stage 0) and sent (but on the last), one gradient received (but on
// the last) and sent (but on stage 0), each of `boundary_bytes` (the micro-batch's residual
// stream on this rank: b·s·h·4, divided by t under SP); plus one exchange of the tied
// embedding's gradient (`tied_embedding_bytes`, 0 when this rank holds both copies or none)
// with the other end of the pipeline (Megatron-LM's embedding group, arXiv 2104.04473 sec. 2).
TrafficByOp pipeline_traffic(const std::vector<int>& virtual_stages_held, int virtual_stage_count, int microbatches,
                             double boundary_bytes, double tied_embedding_bytes);

// The data-parallel group, per step, for a rank holding `layout` (its tensor-parallel shard of
// its pipeline stages), by scheme (train/schemes/scheme.hpp, zero.cpp), with B the buckets
// (group_units_by_bytes at the bucket size) and m micro-batches:
//   DDP:    one all-reduce per bucket (its elements)
//   ZeRO-1: one reduce-scatter and one all-gather per bucket (padded to dp shards)
//   ZeRO-2: one reduce-scatter per bucket per micro-batch, one all-gather per bucket
//   ZeRO-3: per micro-batch, one all-gather per use of a unit (`use_order`, the model's
//           parameter_use_order) and one reduce-scatter per unit; no all-gather after the
//           update (the parameters stay sharded)
// Overlap and prefetch move the calls in time, not their number.
TrafficByOp data_parallel_traffic(const ParameterLayout& layout, int dp, const SchemeSettings& scheme,
                                  const std::vector<int>& use_order);

// DeepSpeed's ZeRO-3 parameter coordinator under full recompute (activation checkpointing), as its
// source runs it (deepspeed/runtime/zero/parameter_offload.py, partitioned_param_coordinator.py,
// read at DeepSpeed edaa722): every submodule's forward pre-hook gathers its parameters
// (fetch_sub_module) and its forward post-hook releases them (release_sub_module), and the
// recompute forward inside the backward runs those hooks again, then the backward pre-hook
// fetches once more. What the recompute's release lets go is gathered a third time. It keeps a
// parameter (PartitionedParameterCoordinator.__params_to_release) when its next use lies within
// `max_reuse_distance` elements of parameters along the recorded trace, or when a prefetch walk
// (`prefetch_bucket_size` elements of not-yet-gathered parameters ahead, within
// `max_live_parameters` held) has already passed that use. PyTorch FSDP skips its pre-forward in
// the recomputed forward, the pre-backward unshard serving it (FSDP1's _runtime_utils.py
// _pre_forward, "skip pre-forward logic in the recomputed forward" in BACKWARD_PRE; FSDP2's
// FSDPState._pre_forward, "the pre-backward hook is responsible for the unshard"): no third
// gather; parbench's engine neither (one acquire per block serves recompute and backward).
// The settings' defaults are DeepSpeed's (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig).
struct DeepSpeedZero3Config {
    double max_reuse_distance = 1e9;           // stage3_max_reuse_distance
    double prefetch_bucket_size = 5e8;         // stage3_prefetch_bucket_size
    double max_live_parameters = 1e9;          // stage3_max_live_parameters
    double param_persistence_threshold = 1e5;  // stage3_param_persistence_threshold: never partitioned
};

// Per micro-batch: the parameters released after their recompute-forward use and gathered again
// for the backward.
struct RecomputeRegather {
    double elements = 0.0;  // partitioned elements (a parameter's full, tensor-parallel-local size)
    double uses = 0.0;      // submodule uses re-gathered
};

// The coordinator run over one micro-batch's trace of `blocks` identical blocks, each a list of
// submodules in forward order, each a list of its parameters' element counts: every block's
// forward, then `turn_elements` (the final norm and the head, one module used at the end of the
// forward and at the start of the backward), then per block from the last: its recompute
// forward and its backward (submodules in reverse). The embedding, before the first block and
// after the last, is left out (it moves no block's release decision).
RecomputeRegather deepspeed_recompute_regather(const std::vector<std::vector<double>>& block_modules, int blocks,
                                               double turn_elements, const DeepSpeedZero3Config& settings = {});

// The same for a dense GPT or Llama laid out by `layout` (the whole model's parameters under its
// tensor split, theory/model_layout.hpp), with Megatron-DeepSpeed's submodules per block:
// input norm, query_key_value (Llama's q, k, v fused), dense, post-attention norm, dense_h_to_4h
// (Llama's gate and up fused), dense_4h_to_h. Refuses MoE and MLP models (std::logic_error).
RecomputeRegather deepspeed_recompute_regather(const ModelConfig& config, const ParameterLayout& layout,
                                               const DeepSpeedZero3Config& settings = {});

// Whether every operation's calls and bytes equal, and no other operation was counted.
bool traffic_matches(const TrafficByOp& expected, const TrafficByOp& measured);

}  // namespace parbench

// What tensor (and sequence) parallelism should cost, from the model's shape alone: the
// collectives per training step on the tensor-parallel group, and the activation memory a
// transformer layer keeps. The report puts these beside the measured figures; a correct
// implementation matches them exactly.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "train/model.hpp"
#include "train/model_config.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {

struct CollectiveVolume {
    double calls = 0.0;
    double bytes = 0.0;  // nccl-tests' size convention, as Communicator::stats() counts
};

// Per training step (every micro-batch's forward and backward) on one tensor-parallel group,
// by collective ("allreduce", "allgather", "reducescatter"); empty when split.size is 1.
// fp32 activations. With n = b·s·h elements of one (micro-batch, sequence, hidden)
// activation and r = b·s rows, per micro-batch (L layers):
//   GPT, TP:     all-reduce  (4L + 2) x n  (2 per layer forward, 2 backward; the embedding's
//                            partial sums; the logits' input gradient)  +  3 x r (the
//                            vocab-parallel cross-entropy's max, sum-exp, target logit)
//   GPT, TP+SP:  all-gather    (6L + 3) x n (per layer: 2 forward, 2 backward of the
//                              reduce-scatters, 2 re-gathers of a split region's input for its
//                              weight gradient; embedding backward; head forward and re-gather)
//                reduce-scatter (4L + 2) x n (per layer 2 forward, 2 backward; embedding
//                              forward; head backward)
//                all-reduce     3 x r + L x 4h + 2h (cross-entropy; LayerNorm gradients)
//   MLP megatron: all-reduce of n per row-parallel layer forward and per column-parallel
//                layer but the first backward, + r when the last layer is column-parallel
//   MLP allgather: all-gather and reduce-scatter of n per layer but the last, + r (the loss)
// Full recompute reruns each layer's forward in backward, and its collectives with it:
// 2L more all-reduces of n per micro-batch (TP), or 2L all-gathers and 2L reduce-scatters (SP).
std::map<std::string, CollectiveVolume> tensor_parallel_traffic_per_step(const ModelConfig& config, int seq_len,
                                                                         int microbatch_size, int microbatches,
                                                                         const TensorSplit& split,
                                                                         Recompute recompute = Recompute::none);

// Activation memory of one GPT layer per micro-batch on one rank, after Korthikanti et al.
// (arXiv 2205.05198 sec. 4, table 2), with s = seq_len, b = micro-batch, h = hidden,
// a = heads, t = tp.
struct ActivationFormula {
    double bytes = 0.0;          // what this implementation stores, fp32
    std::string formula;         // its formula
    double paper_bytes = 0.0;    // table 2's value (16-bit activations, 1-byte dropout masks)
    std::string paper_formula;
};
ActivationFormula gpt_activation_bytes_per_layer(const ModelConfig& config, int seq_len, int microbatch_size,
                                                 const TensorSplit& split);
// GPT's or Llama's (models/llama_cost.hpp), by the config's kind, under `recompute`
// (arXiv 2205.05198 sec. 5): selective keeps all but the attention probabilities (a s² b / t
// floats), full only the layer's input (sbh, or sbh/t under SP); the paper's values for GPT
// are table 2's selective rows and 2sbh (/t under SP) for full.
ActivationFormula transformer_activation_bytes_per_layer(const ModelConfig& config, int seq_len,
                                                         int microbatch_size, const TensorSplit& split,
                                                         Recompute recompute = Recompute::none);

}  // namespace parbench

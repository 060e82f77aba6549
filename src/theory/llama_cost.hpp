// What the Llama model should cost under tensor (and sequence) parallelism, from its shape
// alone: tp collectives per step and the activation memory one layer keeps. The report puts
// them beside the measured figures (tensor_parallel_cost.hpp does the same for GPT and MLP).
#pragma once

#include <map>
#include <string>

#include "theory/model_config.hpp"
#include "theory/tensor_parallel_cost.hpp"
#include "theory/tensor_split.hpp"

namespace parbench {

// With n = b·s·h, r = b·s rows, L layers, per micro-batch:
//   TP:     all-reduce (4L + 2) x n + 3 x r, as GPT (two column/row pairs per layer, the
//           embedding's partial sums, the logits' input gradient, the cross-entropy parts)
//   TP+SP:  all-gather (6L + 3) x n, reduce-scatter (4L + 2) x n, all-reduce 3 x r and the
//           RMSNorm gains' partial gradients L x 2h + h (one gain per norm, no bias)
//   both:   when tp does not divide kv_heads, Wk and Wv are replicated and their partial
//           gradients all-reduced: L calls of 2 · h_kv · h
std::map<std::string, CollectiveVolume> llama_tensor_parallel_traffic_per_step(const ModelConfig& config,
                                                                               int seq_len, int microbatch_size,
                                                                               int microbatches,
                                                                               const TensorSplit& split);

// Per layer, fp32, what models/llama.cpp stores: both RMSNorm outputs and the two residual
// sums (4 sbh), the norms' rstd (2 sb), Q and the attention output (2 sbh/t), K and V
// (2 sb·h_kv', h_kv' = h_kv/t when split, h_kv when replicated), the probabilities
// (a s² b / t), SwiGLU's gate, up and product (3 sbf/t). SP divides the first two by t.
// Korthikanti et al.'s table covers GPT only, so no paper value is given.
ActivationFormula llama_activation_bytes_per_layer(const ModelConfig& config, int seq_len, int microbatch_size,
                                                   const TensorSplit& split);

}  // namespace parbench

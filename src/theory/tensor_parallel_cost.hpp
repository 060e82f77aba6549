// What tensor (and sequence) parallelism should cost, from the model's shape alone: the
// collectives per training step on the tensor-parallel group (theory/traffic.hpp), and the
// activation memory a transformer layer keeps. The report puts these beside the measured figures; a correct
// implementation matches them exactly.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "theory/context_split.hpp"
#include "theory/layer_work.hpp"
#include "theory/model_config.hpp"
#include "theory/model_layout.hpp"
#include "theory/tensor_split.hpp"
#include "theory/traffic.hpp"

namespace parbench {

// Per training step on the tensor-parallel group of an unpipelined rank (the whole model):
// theory/traffic.hpp's tensor_parallel_traffic, whose comment gives the formulas (full
// recompute's rerun forward included).
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
// GPT's or Llama's (theory/llama_cost.hpp), by the config's kind, under `recompute`
// (arXiv 2205.05198 sec. 5): selective keeps all but the attention probabilities (a s² b / t
// floats), full only the layer's input (sbh, or sbh/t under SP); the paper's values for GPT
// are table 2's selective rows and 2sbh (/t under SP) for full, for Llama the same derivation
// from its own items (theory/llama_activation_memory.hpp, what `plan --states zero|megatron` uses).
// Under context parallelism (`context.size` = c > 1, Llama) s is the rank's seq_len / c tokens
// and the layer keeps ContextAttention's saved state (theory/context_parallel.hpp) instead of the
// probabilities, whatever the recompute but full; the paper value is theory/activation_memory.hpp's
// s' = s/c form. With block attention over the whole sequence (`attention` flash without cp,
// theory/engine_attention.hpp) the layer keeps the log-sum-exp rows, a·s·b/t floats, instead of
// the probabilities, whatever the recompute but full.
ActivationFormula transformer_activation_bytes_per_layer(const ModelConfig& config, int seq_len,
                                                         int microbatch_size, const TensorSplit& split,
                                                         Recompute recompute = Recompute::none,
                                                         const ContextSplit& context = {},
                                                         AttentionKind attention = AttentionKind::naive);

}  // namespace parbench

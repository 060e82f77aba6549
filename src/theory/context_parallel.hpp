// What context parallelism (train/context/context_attention.hpp) costs a rank, from the shapes
// alone, so that `plan` and the train report's theory count it as the ledger and the cp
// communicator do: the state one layer keeps for backward per micro-batch
// (ContextAttention::saved_floats), the workspace the one instance a model shares between its
// layers takes at construction, and the cp group's traffic per training step.
#pragma once

#include <cstddef>

#include "kernels/gqa_math.hpp"
#include "theory/activation_memory.hpp"
#include "theory/context_split.hpp"
#include "theory/model_config.hpp"
#include "theory/tensor_split.hpp"
#include "theory/traffic.hpp"

namespace parbench {

struct ContextAttentionFloats {
    std::size_t saved = 0;      // per layer and micro-batch
    std::size_t workspace = 0;  // once per model
};

// For `local`, a rank's shape (T its seq / c tokens, its heads after tensor parallelism).
ContextAttentionFloats context_attention_floats(const GqaShape& local, const ContextSplit& split, int full_seq_len);

// The attention shape of tensor-parallel rank split.rank of a GPT or Llama model holding
// `local_seq_len` tokens of each of `microbatch_size` sequences (models/gpt.cpp's: every
// head its own key/value head; models/llama.cpp's: grouped, split or replicated over tp).
GqaShape context_local_gqa_shape(const ModelConfig& config, int microbatch_size, int local_seq_len,
                               const TensorSplit& split);

// The cp group's traffic per step for a rank holding `layers` transformer layers of a model
// whose attention shape is `local` (context_local_gqa_shape): theory/context_traffic.hpp's
// per-layer forward and backward, for every micro-batch and layer, the forward twice under
// full recompute (the rerun forward repeats its transfers). Empty for a group of one.
TrafficByOp context_parallel_traffic(const GqaShape& local, const ContextSplit& split, int layers, int microbatches,
                                     Recompute recompute);
// The same step as ContextAttentionCounters count it: bytes leaving the rank and messages
// (point-to-point sends, or all-to-all calls).
struct ContextCounterVolume {
    double bytes_sent = 0.0;
    double messages = 0.0;
};
ContextCounterVolume context_parallel_counters(const GqaShape& local, const ContextSplit& split, int layers,
                                               int microbatches, Recompute recompute);

}  // namespace parbench

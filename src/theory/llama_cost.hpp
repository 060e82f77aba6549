// What the Llama model should cost under tensor (and sequence) parallelism, from its shape
// alone: the activation memory one layer keeps. The report puts it beside the measured figure
// (tensor_parallel_cost.hpp does the same for GPT and MLP; the tp traffic of every family is
// theory/traffic.hpp's).
#pragma once

#include <string>

#include "theory/model_config.hpp"
#include "theory/tensor_parallel_cost.hpp"
#include "theory/tensor_split.hpp"

namespace parbench {

// Per layer, fp32, what models/llama.cpp stores: both RMSNorm outputs and the two residual
// sums (4 sbh), the norms' rstd (2 sb), Q and the attention output (2 sbh/t), K and V
// (2 sb·h_kv', h_kv' = h_kv/t when split, h_kv when replicated), the probabilities
// (a s² b / t), SwiGLU's gate, up and product (3 sbf/t). SP divides the first two by t.
// Korthikanti et al.'s table covers GPT only, so no paper value is given.
ActivationFormula llama_activation_bytes_per_layer(const ModelConfig& config, int seq_len, int microbatch_size,
                                                   const TensorSplit& split);

}  // namespace parbench

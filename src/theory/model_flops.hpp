// What a training step is worth: model FLOPs by a published formula, and the model-state
// memory a layout needs in theory. Pure functions, tested with literal cases.
#pragma once

#include <cstddef>
#include <string>

#include "theory/activation_memory.hpp"
#include "theory/model_config.hpp"
#include "theory/zero_partition.hpp"

namespace parbench {

// Megatron-LM's count for one GPT training step, forward + backward without activation
// recomputation (Narayanan et al., arXiv 2104.04473 sec. 5.1, eq. 3 with the recompute
// forward removed: 72 instead of 96):
//     F = 72 · B · s · l · h² · (1 + s / (6h) + V / (12 · l · h))
// B sequences of s tokens, l layers, hidden h, vocabulary V. Attention scores are counted
// for the full s x s matrix: the causal mask's halving is NOT taken (as in the paper).
double megatron_gpt_flops(double batch, double seq, double layers, double hidden, double vocab);
// The MLP: 2 · h² multiply-adds per layer per sample forward, twice that backward:
//     F = 6 · B · l · h²    (biases and GELU are not counted, as matmul-only conventions do)
double mlp_flops(double batch, double layers, double hidden);
double model_flops_per_step(const ModelConfig& config, int global_batch, int seq_len);
std::string flops_formula(const ModelConfig& config);
// The FLOPs recompute adds to a step (hardware FLOPs = model FLOPs + these; HFU counts them,
// MFU does not, arXiv 2204.02311 appendix B): selective repeats the attention core's
// forward, QKᵀ and AV, 4·B·l·s²·h; full repeats each layer's forward: for GPT
// 24·B·s·l·h² + 4·B·l·s²·h (Megatron's 96 instead of 72, arXiv 2104.04473 sec. 5.1), for
// Llama theory/llama_formulas' layer forward. 0 for none.
double recompute_flops_per_step(const ModelConfig& config, int global_batch, int seq_len, Recompute recompute);

// ZeRO's model-state memory per rank (arXiv 1910.02054 sec. 5, fig. 1) for fp32 Adam:
// parameters 4 B, gradients 4 B, optimizer (m, v) 8 B per parameter = 16 B/param, with
// optimizer state / dp from stage 1, gradients / dp from stage 2, parameters / dp at stage 3.
ModelStates zero_theoretical_memory(std::size_t parameters, int dp, int zero_stage);

}  // namespace parbench

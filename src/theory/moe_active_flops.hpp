// Model FLOPs of a mixture-of-experts Llama counted on its ACTIVE parameters: what one token
// runs through (DeepSeek-V3's and Mixtral's "active parameters"; MFU of MoE training is quoted
// this way). Against the dense model of the same config, each MoE layer replaces the MLP's
// weights (Llama's SwiGLU 3·h·f, GPT's 8·h²) by the router's h·E and k + S experts' m·h·f_e
// each (m = 3 SwiGLU, 2 GELU matrices), so per token and matmul pass the weights touched
// change by
//     delta = moe_layers · (h·E + (k + S)·m·h·f_e - dense MLP weights)
// and the model FLOPs per step by 6·B·s·delta (2 forward + 4 backward per weight per token,
// Megatron-LM's convention, arXiv 2104.04473 sec. 5.1); a full recompute's extra forward by
// 2·B·s·delta. Routing, permutation and the combine's weighted sum are not counted, like the
// softmax and norms of the dense formula.
#pragma once

#include "theory/model_config.hpp"

namespace parbench {

// delta above (0 without "moe").
double moe_active_weight_delta(const ModelConfig& config);

}  // namespace parbench

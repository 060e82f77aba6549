// GPT-2-style decoder (Radford et al. 2019; llm.c's train_gpt2.c is the readable reference):
// token + learned position embeddings, L pre-LayerNorm blocks of causal multi-head
// attention and a 4h GELU MLP, a final LayerNorm, logits = x · wteᵀ (tied), cross-entropy.
//
// Units: 0 = "embedding" (wte, wpe, lnfw, lnfb: everything outside the blocks, so the tied
// output projection and the final LayerNorm travel with the embedding), 1..L = the blocks,
// then with a config's "moe" one unit of routed experts per MoE layer, whose MLP is a mixture
// of experts (train/moe/moe_layer.hpp).
#pragma once

#include <cstdint>
#include <memory>

#include "train/model.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {

std::unique_ptr<Model> make_gpt_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                      Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp,
                                      const PipelinePart& part = {}, Precision precision = Precision::fp32,
                                      Recompute recompute = Recompute::none, const ContextGroup& cp = {},
                                      const MoeContext& moe = {}, AttentionKind attention = AttentionKind::naive);

}  // namespace parbench

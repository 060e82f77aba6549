// The Llama-style decoder (Touvron et al., arXiv 2302.13971; Llama 3, arXiv 2407.21783):
// pre-norm blocks of RMSNorm, grouped-query attention with rotary positions on Q and K, and a
// SwiGLU MLP; an input embedding and an output projection that are separate matrices. With a
// config's "moe", the MLP of its MoE layers is a mixture of experts (train/moe/moe_layer.hpp).
#pragma once

#include <memory>

#include "train/model.hpp"

namespace parbench {

std::unique_ptr<Model> make_llama_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                        Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp,
                                        const PipelinePart& part, Precision precision, Recompute recompute,
                                        const ContextGroup& cp = {}, const MoeContext& moe = {},
                                        AttentionKind attention = AttentionKind::naive);

}  // namespace parbench

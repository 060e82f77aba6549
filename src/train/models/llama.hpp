// The Llama-style decoder (Touvron et al., arXiv 2302.13971; Llama 3, arXiv 2407.21783):
// pre-norm blocks of RMSNorm, grouped-query attention with rotary positions on Q and K, and a
// SwiGLU MLP; an input embedding and an output projection that are separate matrices.
#pragma once

#include <memory>

#include "train/model.hpp"

namespace parbench {

// Units: 0 the embedding, 1..L the blocks, L + 1 the head (final RMSNorm and output).
ParameterLayout llama_parameter_layout(const ModelConfig& config, const TensorSplit& split = {});
std::unique_ptr<Model> make_llama_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                        Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp,
                                        const PipelinePart& part, Precision precision, Recompute recompute,
                                        const ContextGroup& cp = {});
// Whether tensor parallelism of `tp` ranks splits the key/value heads (they divide) or every
// rank holds them all (replicated), docs/training.md's rule.
bool llama_kv_heads_split(const ModelConfig& config, int tp);

}  // namespace parbench

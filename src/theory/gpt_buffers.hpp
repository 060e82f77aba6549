// The buffers a GPT layer keeps for backward and the zero-bubble schedules' weight-gradient
// stash (llm.c's size table, as theory/mlp_buffers.hpp for the MLP): train/models/gpt.cpp
// allocates exactly these and the memory theory (theory/memory.cpp) sums them. Sizes in floats.
// The frame around the layers (micro-batch data, head, pipeline slots, the scratch both models
// reuse) is theory/transformer_buffers.hpp's.
#pragma once

#include <cstddef>
#include <vector>

#include "theory/model_config.hpp"
#include "theory/precision.hpp"

namespace parbench {

// One layer's own buffers but the attention's saved state (the probabilities, or context
// parallelism's and block attention's small state: theory/memory.cpp's attention_floats).
// `rows`: B·T (this rank's tokens); `residual_rows`: R, B·T/t under SP (LayerNorm and residual
// regions); C/t channels and 4C/t MLP columns on this rank.
struct GptBlockBuffers {
    std::size_t ln1 = 0, ln1_mean = 0, ln1_rstd = 0;  // (R,C), (R), (R)
    std::size_t qkv = 0;                              // (B,T,3C/t)
    std::size_t atty = 0;                             // (B,T,C/t) attention output
    std::size_t residual2 = 0;                        // (R,C)
    std::size_t ln2 = 0, ln2_mean = 0, ln2_rstd = 0;  // (R,C), (R), (R)
    std::size_t fch = 0, fch_gelu = 0;                // (B,T,4C/t): a dense layer's MLP only
    std::size_t residual3 = 0;                        // (R,C) the layer's output
    // What a layer keeps but the attention state; without the MLP's two (an MoE layer keeps
    // the MoE layer's buffers instead) when `dense_mlp` is false.
    std::size_t kept(bool dense_mlp) const;
};

// A split backward's B keeps these output gradients for its W (arXiv 2401.10241 sec. 2).
struct GptStashBuffers {
    std::size_t dmlp = 0;        // (B,T,C)
    std::size_t dfc = 0;         // (B,T,4C/t)
    std::size_t dattention = 0;  // (B,T,C)
    std::size_t dqkv = 0;        // (B,T,3C/t)
    std::size_t total() const { return dmlp + dfc + dattention + dqkv; }
};

// The backward scratch GPT's layers reuse beside the frame's (one set for every layer), and
// under context parallelism wpe's rows of the held positions, gathered for the embedding, with
// their gradient.
struct GptScratchBuffers {
    std::size_t dfc = 0;                        // (B,T,4C/t) the GELU's input gradient
    std::size_t datty = 0;                      // (B,T,C/t) the attention output's gradient
    std::size_t dqkv = 0;                       // (B,T,3C/t)
    std::size_t positions = 0, dpositions = 0;  // (T,C) each under context parallelism, else none
};

GptBlockBuffers gpt_block_buffers(const ModelConfig& config, int tp, std::size_t rows, std::size_t residual_rows);
GptStashBuffers gpt_stash_buffers(const ModelConfig& config, int tp, std::size_t rows);
// The matmuls a layer runs on `rows` rows (they size the bf16 operand copies,
// theory/matmul_buffers.hpp): QKV (q, k and v apart, C/t outputs each, under context
// parallelism: `context`), the attention projection, the MLP's up and down.
std::vector<MatmulShape> gpt_block_matmul_shapes(const ModelConfig& config, int tp, std::size_t rows, bool context);
// `local_tokens`: T, the tokens of a sequence this rank holds (seq/cp); `context`: cp > 1.
GptScratchBuffers gpt_scratch_buffers(const ModelConfig& config, int tp, std::size_t rows, std::size_t local_tokens,
                                      bool context);

}  // namespace parbench

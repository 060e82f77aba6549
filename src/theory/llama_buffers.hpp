// The buffers a Llama layer keeps for backward and the zero-bubble schedules' weight-gradient
// stash (llm.c's size table, as theory/gpt_buffers.hpp for GPT): train/models/llama.cpp
// allocates exactly these and the memory theory (theory/memory.cpp) sums them. Sizes in floats.
#pragma once

#include <cstddef>
#include <vector>

#include "theory/model_config.hpp"
#include "theory/precision.hpp"

namespace parbench {

// One layer's own buffers but the attention's saved state. `rows`: B·T (this rank's tokens);
// `residual_rows`: R, B·T/t under SP; q C/t, k and v this rank's key/value heads
// (llama_kv_heads_split: all of them when tp does not divide them), the SwiGLU ffn_hidden/t.
struct LlamaBlockBuffers {
    std::size_t norm1 = 0, rstd1 = 0;      // (R,C), (R)
    std::size_t q = 0, k = 0, v = 0;       // (B,T,C/t), (B,T,KV/t) twice
    std::size_t atty = 0;                  // (B,T,C/t) attention output
    std::size_t residual2 = 0;             // (R,C)
    std::size_t norm2 = 0, rstd2 = 0;      // (R,C), (R)
    std::size_t gate = 0, up = 0, glu = 0; // (B,T,F/t): a dense layer's SwiGLU only
    std::size_t residual3 = 0;             // (R,C) the layer's output
    // Without the SwiGLU's three (an MoE layer keeps the MoE layer's buffers instead) when
    // `dense_mlp` is false.
    std::size_t kept(bool dense_mlp) const;
};

// A split backward's B keeps these output gradients for its W (arXiv 2401.10241 sec. 2).
struct LlamaStashBuffers {
    std::size_t dmlp = 0, dgate = 0, dup = 0, dattention = 0, dq = 0, dk = 0, dv = 0;
    std::size_t total() const { return dmlp + dgate + dup + dattention + dq + dk + dv; }
};

// The backward scratch Llama's layers reuse beside the frame's (one set for every layer), the
// replicated key/value weights' partial gradients (tp > 1 not dividing the key/value heads:
// every rank holds them whole, their gradients summed over tp), and each held token's position
// (int32), by which RoPE turns it.
struct LlamaScratchBuffers {
    std::size_t dgate = 0, dup = 0;  // (B,T,F/t)
    std::size_t datty = 0, dq = 0;   // (B,T,C/t)
    std::size_t dk = 0, dv = 0;      // (B,T,KVl): this rank's key/value channels
    std::size_t kv_gradients = 0;    // (2,KVl,C) when replicated over tp > 1, else none
    std::size_t positions = 0;       // (T)
};

LlamaBlockBuffers llama_block_buffers(const ModelConfig& config, int tp, std::size_t rows, std::size_t residual_rows);
LlamaStashBuffers llama_stash_buffers(const ModelConfig& config, int tp, std::size_t rows);
// The matmuls a layer runs on `rows` rows (they size the bf16 operand copies,
// theory/matmul_buffers.hpp): Q, K and V (this rank's key/value channels), the output
// projection, the SwiGLU's gate and up (one shape) and down.
std::vector<MatmulShape> llama_block_matmul_shapes(const ModelConfig& config, int tp, std::size_t rows);
// `local_tokens`: T, the tokens of a sequence this rank holds (seq/cp).
LlamaScratchBuffers llama_scratch_buffers(const ModelConfig& config, int tp, std::size_t rows, std::size_t local_tokens);

}  // namespace parbench

#include "theory/llama_buffers.hpp"

#include "theory/model_layout.hpp"

namespace parbench {
namespace {

// This rank's columns of q, of k (and v), and of the SwiGLU.
struct LlamaColumns {
    std::size_t q, kv, ffn;
};

LlamaColumns llama_columns(const ModelConfig& config, int tp) {
    const int head_size = config.hidden / config.heads;
    const int kv_heads = llama_kv_heads_split(config, tp) ? config.kv_heads / tp : config.kv_heads;
    return {static_cast<std::size_t>(config.hidden / tp), static_cast<std::size_t>(kv_heads * head_size),
            static_cast<std::size_t>(config.ffn_hidden / tp)};
}

}  // namespace

std::size_t LlamaBlockBuffers::kept(bool dense_mlp) const {
    return norm1 + rstd1 + q + k + v + atty + residual2 + norm2 + rstd2 + (dense_mlp ? gate + up + glu : 0) + residual3;
}

LlamaBlockBuffers llama_block_buffers(const ModelConfig& config, int tp, std::size_t rows, std::size_t residual_rows) {
    const LlamaColumns columns = llama_columns(config, tp);
    const std::size_t rc = residual_rows * static_cast<std::size_t>(config.hidden);
    LlamaBlockBuffers b;
    b.norm1 = b.residual2 = b.norm2 = b.residual3 = rc;
    b.rstd1 = b.rstd2 = residual_rows;
    b.q = b.atty = rows * columns.q;
    b.k = b.v = rows * columns.kv;
    b.gate = b.up = b.glu = rows * columns.ffn;
    return b;
}

LlamaStashBuffers llama_stash_buffers(const ModelConfig& config, int tp, std::size_t rows) {
    const LlamaColumns columns = llama_columns(config, tp);
    const std::size_t btc = rows * static_cast<std::size_t>(config.hidden);
    LlamaStashBuffers s;
    s.dmlp = s.dattention = btc;
    s.dgate = s.dup = rows * columns.ffn;
    s.dq = rows * columns.q;
    s.dk = s.dv = rows * columns.kv;
    return s;
}

std::vector<MatmulShape> llama_block_matmul_shapes(const ModelConfig& config, int tp, std::size_t rows) {
    const LlamaColumns columns = llama_columns(config, tp);
    const int N = static_cast<int>(rows), C = config.hidden, q = static_cast<int>(columns.q);
    const int kv = static_cast<int>(columns.kv), F = static_cast<int>(columns.ffn);
    return {{N, C, q}, {N, C, kv}, {N, q, C}, {N, C, F}, {N, F, C}};
}

LlamaScratchBuffers llama_scratch_buffers(const ModelConfig& config, int tp, std::size_t rows, std::size_t local_tokens) {
    const LlamaColumns columns = llama_columns(config, tp);
    LlamaScratchBuffers s;
    s.dgate = s.dup = rows * columns.ffn;
    s.datty = s.dq = rows * columns.q;
    s.dk = s.dv = rows * columns.kv;
    if (tp > 1 && !llama_kv_heads_split(config, tp)) s.kv_gradients = 2 * columns.kv * static_cast<std::size_t>(config.hidden);
    s.positions = local_tokens;
    return s;
}

}  // namespace parbench

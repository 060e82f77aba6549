#include "theory/gpt_buffers.hpp"

namespace parbench {
namespace {

std::size_t local_channels(const ModelConfig& config, int tp) {
    return static_cast<std::size_t>(config.hidden / tp);
}
std::size_t local_mlp(const ModelConfig& config, int tp) {
    return static_cast<std::size_t>(4 * config.hidden / tp);
}

}  // namespace

std::size_t GptBlockBuffers::kept(bool dense_mlp) const {
    return ln1 + ln1_mean + ln1_rstd + qkv + atty + residual2 + ln2 + ln2_mean + ln2_rstd +
           (dense_mlp ? fch + fch_gelu : 0) + residual3;
}

GptBlockBuffers gpt_block_buffers(const ModelConfig& config, int tp, std::size_t rows, std::size_t residual_rows) {
    const std::size_t rc = residual_rows * static_cast<std::size_t>(config.hidden);
    const std::size_t local = rows * local_channels(config, tp);
    const std::size_t wide = rows * local_mlp(config, tp);
    GptBlockBuffers b;
    b.ln1 = rc;
    b.ln1_mean = b.ln1_rstd = residual_rows;
    b.qkv = 3 * local;
    b.atty = local;
    b.residual2 = rc;
    b.ln2 = rc;
    b.ln2_mean = b.ln2_rstd = residual_rows;
    b.fch = b.fch_gelu = wide;
    b.residual3 = rc;
    return b;
}

GptStashBuffers gpt_stash_buffers(const ModelConfig& config, int tp, std::size_t rows) {
    const std::size_t btc = rows * static_cast<std::size_t>(config.hidden);
    return GptStashBuffers{btc, rows * local_mlp(config, tp), btc, 3 * rows * local_channels(config, tp)};
}

std::vector<MatmulShape> gpt_block_matmul_shapes(const ModelConfig& config, int tp, std::size_t rows, bool context) {
    const int N = static_cast<int>(rows), C = config.hidden, Cl = static_cast<int>(local_channels(config, tp));
    const int F = static_cast<int>(local_mlp(config, tp));
    return {{N, C, context ? Cl : 3 * Cl}, {N, Cl, C}, {N, C, F}, {N, F, C}};
}

GptScratchBuffers gpt_scratch_buffers(const ModelConfig& config, int tp, std::size_t rows, std::size_t local_tokens,
                                      bool context) {
    const std::size_t local = rows * local_channels(config, tp);
    const std::size_t positions = context ? local_tokens * static_cast<std::size_t>(config.hidden) : 0;
    return GptScratchBuffers{rows * local_mlp(config, tp), local, 3 * local, positions, positions};
}

}  // namespace parbench

#include "theory/transformer_buffers.hpp"

namespace parbench {

DecoderFrameShape decoder_frame_shape(const ModelConfig& config, int tp, bool sp, std::size_t batch,
                                      std::size_t local_tokens, bool standard_attention, bool selective_recompute) {
    const auto t = static_cast<std::size_t>(tp);
    const bool gpt = config.kind == ModelKind::gpt;
    DecoderFrameShape s;
    s.rows = batch * local_tokens;
    s.residual_rows = sp ? s.rows / t : s.rows;
    s.hidden = static_cast<std::size_t>(config.hidden);
    s.vocab_local = static_cast<std::size_t>(config.vocab) / t;
    s.mlp_local = static_cast<std::size_t>(gpt ? 4 * config.hidden : config.ffn_hidden) / t;
    s.scores = standard_attention ? batch * (static_cast<std::size_t>(config.heads) / t) * local_tokens * local_tokens : 0;
    s.block_norm_tensors = gpt ? 4 : 2;
    s.norm_keeps_mean = gpt;
    s.sequence_parallel = sp;
    s.selective_recompute = selective_recompute;
    return s;
}

DecoderFrameBuffers decoder_frame_buffers(const DecoderFrameShape& s) {
    const std::size_t btc = s.rows * s.hidden, rc = s.residual_rows * s.hidden;
    DecoderFrameBuffers f;
    f.microbatch = MicrobatchBuffers{s.rows, s.rows, s.rows};
    f.boundary_input = f.boundary_gradient = rc;
    f.head = DecoderHeadBuffers{rc, s.norm_keeps_mean ? s.residual_rows : 0, s.residual_rows,
                                s.rows * s.vocab_local, s.rows, s.rows, s.rows};
    f.preatt = s.scores;
    f.projection = btc;
    f.dlosses = s.rows;
    f.dlogits = s.rows * s.vocab_local;
    f.dnormed = btc;
    f.dwide = s.rows * s.mlp_local;
    f.dpreatt = f.datt = s.scores;
    if (s.selective_recompute) f.shared_probabilities = s.scores;
    if (s.sequence_parallel) {
        f.norm_pack = s.block_norm_tensors * s.hidden;
        f.gathered = f.dgathered = btc;
        f.projection_local = f.dnormed_local = rc;
    }
    return f;
}

std::vector<MatmulShape> decoder_matmul_shapes(std::vector<MatmulShape> block, const ModelConfig& config, int tp,
                                               std::size_t rows, bool holds_head, const MoeMemoryShape* moe) {
    if (holds_head) block.push_back({static_cast<int>(rows), config.hidden, config.vocab / tp});
    if (moe != nullptr)
        for (const MatmulShape& shape : moe_expert_matmul_shapes(*moe)) block.push_back(shape);
    return block;
}

}  // namespace parbench

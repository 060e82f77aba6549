#include "train/ops/sequence_attention.hpp"

namespace parbench {

SequenceAttention::SequenceAttention(const GqaShape& shape, int q_pitch, int kv_pitch)
    : block_(attention_block(shape, 0, shape.T, 0, shape.T, BlockMask::causal)) {
    block_.q_pitch = q_pitch;
    block_.kv_pitch = kv_pitch;
}

std::size_t SequenceAttention::workspace_floats(const Ops& ops) const {
    return 2 * block_.query_rows() + ops.block_attention_scratch_floats(block_);
}

void SequenceAttention::forward(Ops& ops, float* out, float* lse, float* workspace, const float* q, const float* k,
                                const float* v) const {
    const std::size_t rows = block_.query_rows();
    float* row_max = workspace;
    float* row_sum = workspace + rows;
    // One block is the whole row: its partial output is the output before the division by the
    // row sum, and its statistics the rows' (nothing to merge).
    ops.block_attention_forward(out, row_max, row_sum, workspace + 2 * rows, q, k, v, block_);
    ops.block_attention_finish(out, lse, row_max, row_sum, rows, block_.hs);
}

void SequenceAttention::backward(Ops& ops, float* dq, float* dk, float* dv, float* workspace, const float* dout,
                                 const float* out, const float* lse, const float* q, const float* k,
                                 const float* v) const {
    const std::size_t rows = block_.query_rows();
    float* delta = workspace;
    ops.block_attention_delta(delta, dout, out, rows, block_.hs);
    ops.block_attention_backward(dq, dk, dv, workspace + 2 * rows, dout, q, k, v, lse, delta, block_);
}

}  // namespace parbench

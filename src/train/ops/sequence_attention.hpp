// Causal attention over whole sequences with the block kernels (FlashAttention-style: the
// whole sequence as one causal block of kernels/block_attention_math.hpp), what a GPT or Llama
// model runs instead of the standard attention when theory/engine_attention.hpp chooses flash.
// Forward writes the normalised output and the log-sum-exp of every query row, (B, T, NH)
// floats, the only state a layer keeps for backward (no T x T probabilities); backward
// recomputes the scores from q, k and it (FlashAttention-2, arXiv 2307.08691 alg. 2). q, k and
// v are read in place at their pitches (GPT: inside its fused qkv rows).
#pragma once

#include <cstddef>

#include "kernels/block_attention_math.hpp"
#include "kernels/gqa_math.hpp"
#include "train/ops/ops.hpp"

namespace parbench {

class SequenceAttention {
  public:
    // `shape`: B sequences of T tokens, NH query heads over NKV key/value heads of hs. q (dq)
    // holds a token's NH*hs floats every q_pitch floats, k, v (dk, dv) their NKV*hs every
    // kv_pitch; out and dout are (B, T, NH*hs).
    SequenceAttention(const GqaShape& shape, int q_pitch, int kv_pitch);

    // Floats a layer keeps for backward (the log-sum-exp rows), and of the workspace all
    // layers share (row statistics, then D; the kernels' score scratch).
    std::size_t saved_floats() const { return block_.query_rows(); }
    std::size_t workspace_floats(const Ops& ops) const;

    void forward(Ops& ops, float* out, float* lse, float* workspace, const float* q, const float* k,
                 const float* v) const;
    // dq, dk, dv +=.
    void backward(Ops& ops, float* dq, float* dk, float* dv, float* workspace, const float* dout, const float* out,
                  const float* lse, const float* q, const float* k, const float* v) const;

  private:
    AttentionBlock block_;
};

}  // namespace parbench

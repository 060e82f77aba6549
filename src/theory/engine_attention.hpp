// Which attention parbench's own engine runs over a whole sequence (no context parallelism),
// decided once for `train` and `plan` alike so that plan's memory equals train's ledger:
//   naive  the standard attention (train/ops/attention_heads.cpp): the B x NH x T x T scores and
//          probabilities, the probabilities kept per layer for backward;
//   flash  the block kernels context parallelism uses (train/ops/block_attention.cpp) with the
//          whole sequence as one causal block: 32-row query tiles, the log-sum-exp kept per
//          query row and the scores recomputed in backward (FlashAttention-2, arXiv 2307.08691).
// `auto` takes flash from block_attention_min_seq_len on where the backend's block kernels tile
// (Ops::tiles_block_attention: the CPU's; the CUDA kernels write the whole score tile, so a GPU
// keeps naive). Under context parallelism (cp > 1) the attention is ContextAttention's, block
// by block, whatever the length: only `auto` is accepted there.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/gqa_math.hpp"
#include "theory/layer_work.hpp"

namespace parbench {

// Forward + backward of one layer's attention, block against standard, llama-small's heads on
// one CPU core (results/2026-12-02-cpu-step-vs-pytorch/2026-12-02-step4.md sec. 2, thread CPU time): 1.03x at T = 128,
// 0.93x at 256, 0.88x at 512, 0.63-0.68x at 1024-2048. The block kernels win from 256 on.
inline constexpr int block_attention_min_seq_len = 256;

// `requested` is --attention's value: auto, flash or naive. UsageError naming --attention for
// anything else, for flash where the block kernels do not tile, and for flash or naive under cp.
AttentionKind engine_attention(const std::string& requested, bool backend_tiles_block_attention, int seq_len, int cp);

// What the block attention over whole sequences (train/ops/sequence_attention.hpp) of a rank's
// shape `local` takes, in floats: per layer and micro-batch the log-sum-exp of every query row
// (B x T x NH), and once per model the row statistics (2 B x T x NH: max and sum, then D) and
// the CPU kernels' score scratch (two block_query_rows x T tiles, backward's P and dS).
struct SequenceAttentionFloats {
    std::size_t saved = 0;
    std::size_t workspace = 0;
};
SequenceAttentionFloats sequence_attention_floats(const GqaShape& local);
}  // namespace parbench

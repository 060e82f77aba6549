// Context parallelism, the sequence cut of attention. A context-parallel group of c ranks
// splits every sequence into c parts; everything outside attention acts per token and needs
// no communication, and attention is computed in one of two ways:
//
//   ring     (Liu et al., Ring Attention, arXiv 2310.01889; Megatron-core's and torchtitan's
//            CP): each rank keeps its queries and passes its K/V block around the group with
//            isend/irecv while it computes on the block it holds, accumulating the output and
//            log-sum-exp block by block (the online-softmax rescaling); the backward pass
//            mirrors it, dK/dV travelling back around the ring to the block's owner.
//   alltoall (Jacobs et al., DeepSpeed-Ulysses, arXiv 2309.14509): an all-to-all reshards Q, K
//            and V from sequence-sharded to head-sharded, every rank computes whole-sequence
//            attention for 1/c of the heads, and a second all-to-all reshards the output back.
//
// Causal masking makes contiguous chunks unequal work under ring (the last chunk sees every
// key, the first only its own): with the zigzag balance each rank holds two of 2c chunks,
// one from each end of the sequence, so every rank does the same work (Megatron-core's
// load balancing); `none` keeps contiguous chunks, to measure the imbalance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "kernels/gqa_math.hpp"
#include "theory/context_split.hpp"
#include "train/memory_ledger.hpp"
#include "train/ops/ops.hpp"

namespace parbench {

// What one rank's attention did since the counters were last reset (the train report's cp
// figures: attention compute per rank shows the imbalance, wait is the exposed cp comm).
struct ContextAttentionCounters {
    double compute_ms = 0.0;        // attention math on this rank, forward and backward
    double wait_ms = 0.0;           // blocked on the group's transfers (exposed cp communication)
    std::uint64_t bytes_sent = 0;   // by this rank over the cp group
    std::uint64_t messages = 0;     // point-to-point sends (ring) or all-to-all calls (alltoall)
    // Attention scores this rank computed (query-key pairs it evaluated, forward and backward,
    // masked ones not counted): the work per rank, independent of the machine's speed, which
    // is how tests show `--cp-balance none`'s imbalance and zigzag's balance.
    std::uint64_t score_elements = 0;
};

// One layer's context-parallel causal attention (GQA; multi-head attention is NKV = NH).
// Stateless between calls but for its workspace: what backward needs is kept by the model in
// a `saved` buffer of saved_floats() per layer and micro-batch (activation memory, counted by
// the model's ledger), so pipelines and recompute keep working as for plain attention.
class ContextAttention {
  public:
    // `local` is this rank's shape: T = its tokens (T_full / c), NH and NKV its heads after
    // tensor parallelism. `cp` is the context-parallel group (size split.size). Workspace
    // (blocks in flight, score tiles) comes from `ledger` as activations. Throws UsageError
    // naming --cp-style alltoall when the heads do not divide by c.
    ContextAttention(Communicator& cp, Ops& ops, MemoryLedger& ledger, const ContextSplit& split,
                     const GqaShape& local, int full_seq_len);
    ~ContextAttention();
    ContextAttention(const ContextAttention&) = delete;
    ContextAttention& operator=(const ContextAttention&) = delete;

    // Floats that forward keeps in `saved` for backward.
    std::size_t saved_floats() const;

    // q (B,T,NH*hs), k and v (B,T,NKV*hs): this rank's tokens in context_positions() order,
    // already rotated (RoPE by each token's own position) where the model rotates. Writes
    // out (B,T,NH*hs) and `saved`. Collective over the cp group.
    void forward(float* out, float* saved, const float* q, const float* k, const float* v);
    // dq, dk, dv +=, from dout and what forward wrote. Collective over the cp group.
    void backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* saved,
                  const float* q, const float* k, const float* v);

    const ContextAttentionCounters& counters() const;
    void reset_counters();

  private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace parbench

// The buffers context parallelism's attention (train/context/) allocates, with their sizes
// (llm.c's size table, as theory/transformer_buffers.hpp for the frame): what one layer keeps
// for backward per micro-batch (`saved`, which the model allocates) and the parts of the one
// workspace the instance a model shares between its layers takes at construction.
// train/context/ring_attention.cpp and alltoall_attention.cpp allocate exactly these and
// theory/context_parallel.cpp's context_attention_floats, which the memory theory and the
// train report read, sums them. Sizes in floats.
#pragma once

#include <cstddef>

#include "kernels/gqa_math.hpp"
#include "theory/context_split.hpp"

namespace parbench {

// Ring attention, for a rank's shape `local` (its T = seq / c tokens): the parts in the order
// RingAttention takes them from its workspace.
struct RingAttentionBuffers {
    std::size_t saved = 0;           // each local query row's log-sum-exp (B, T/c, NH)
    std::size_t kv_block = 0;        // one K or V block: two of each received alternately
    std::size_t partial_out = 0;     // the forward's partial output (B, T/c, NH·hs)
    std::size_t statistics = 0;      // each of the partial max and sum, the running max and sum
    std::size_t scores = 0;          // two score tiles of a chunk against a chunk
    std::size_t gradient_part = 0;   // each of backward's dK and dV part of the held block
    std::size_t accumulated = 0;     // each of the dK and dV accumulators, two of each in flight
    static constexpr int received_blocks = 2, statistic_arrays = 4, accumulators = 2;
    std::size_t workspace() const {
        return 2 * received_blocks * kv_block + partial_out + statistic_arrays * statistics + scores +
               2 * gradient_part + 2 * accumulators * accumulated;
    }
};
RingAttentionBuffers ring_attention_buffers(const GqaShape& local, const ContextSplit& split, int full_seq_len);

// All-to-all (Ulysses) attention: the rank's 1/c of the query heads over the whole sequence
// and the key/value head window they read (`heads`, theory/context_traffic.hpp's window).
struct AlltoallAttentionBuffers {
    GqaShape heads;                  // the head-sharded shape (its first_query_head left 0)
    std::size_t saved_q = 0;         // saved per layer: the head-sharded q, k and v
    std::size_t saved_kv = 0;        // each of k and v
    std::size_t exchange = 0;        // each of the send and receive buffers
    std::size_t query_heads = 0;     // each of the head-sharded output, its gradient and dq
    std::size_t kv_heads = 0;        // each of the head-sharded dk and dv
    std::size_t scores = 0;          // each of the scores (backward: their gradient), probabilities and their gradient
    static constexpr int exchange_buffers = 2, query_head_arrays = 3, kv_head_arrays = 2, score_arrays = 3;
    std::size_t saved() const { return saved_q + 2 * saved_kv; }
    std::size_t workspace() const {
        return exchange_buffers * exchange + query_head_arrays * query_heads + kv_head_arrays * kv_heads +
               score_arrays * scores;
    }
};
AlltoallAttentionBuffers alltoall_attention_buffers(const GqaShape& local, const ContextSplit& split,
                                                    int full_seq_len);

}  // namespace parbench

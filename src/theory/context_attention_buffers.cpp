#include "theory/context_attention_buffers.hpp"

#include <algorithm>

#include "kernels/block_attention_math.hpp"
#include "theory/context_traffic.hpp"

namespace parbench {

RingAttentionBuffers ring_attention_buffers(const GqaShape& local, const ContextSplit& split, int full_seq_len) {
    const int chunk = detail::context_chunks(full_seq_len, split).length;
    RingAttentionBuffers b;
    b.saved = static_cast<std::size_t>(local.B) * local.T * local.NH;
    b.kv_block = local.kv_elements();
    b.partial_out = local.q_elements();
    b.statistics = b.saved;
    b.scores = 2 * attention_block(local, 0, chunk, 0, chunk, BlockMask::full).tile_elements();
    b.gradient_part = b.kv_block;
    b.accumulated = b.kv_block;
    return b;
}

AlltoallAttentionBuffers alltoall_attention_buffers(const GqaShape& local, const ContextSplit& split,
                                                    int full_seq_len) {
    const int c = split.size;
    const KvHeadWindow window = alltoall_kv_window(context_attention_shape(local, c, split.style), split.rank);
    AlltoallAttentionBuffers b;
    b.heads = GqaShape{local.B, full_seq_len, local.NH / c, window.count, local.hs, 0, local.queries_per_kv};
    b.saved_q = b.heads.q_elements();
    b.saved_kv = b.heads.kv_elements();
    const std::size_t local_tokens = static_cast<std::size_t>(local.B) * local.T * window.count * local.hs;
    b.exchange = std::max(local.q_elements(), local_tokens * c);
    b.query_heads = b.heads.q_elements();
    b.kv_heads = b.heads.kv_elements();
    b.scores = b.heads.score_elements();
    return b;
}

}  // namespace parbench

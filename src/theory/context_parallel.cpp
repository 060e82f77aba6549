#include "theory/context_parallel.hpp"

#include <algorithm>

#include "kernels/block_attention_math.hpp"
#include "theory/context_traffic.hpp"
#include "theory/model_layout.hpp"

namespace parbench {

// The counts mirror train/context/ring_attention.cpp and alltoall_attention.cpp's constructors
// and saved_floats(); the train report puts them beside what the instance allocated.
ContextAttentionFloats context_attention_floats(const GqaShape& local, const ContextSplit& split, int full_seq_len) {
    ContextAttentionFloats floats;
    const int c = split.size;
    if (c <= 1) return floats;
    if (split.style == ContextStyle::ring) {
        // Per layer: each query row's log-sum-exp. Once: K/V blocks in flight (two of each),
        // the forward's partial output and statistics, two score tiles of a chunk against a
        // chunk, and backward's dK/dV parts and accumulators.
        const std::size_t kv = local.kv_elements();
        const std::size_t stats = static_cast<std::size_t>(local.B) * local.T * local.NH;
        const int chunk = split.balance == ContextBalance::zigzag ? full_seq_len / (2 * c) : full_seq_len / c;
        const std::size_t tile = attention_block(local, 0, chunk, 0, chunk, BlockMask::full).tile_elements();
        floats.saved = stats;
        floats.workspace = 4 * kv + local.q_elements() + 4 * stats + 2 * tile + 6 * kv;
        return floats;
    }
    // alltoall: per layer the head-sharded q, k and v over the whole sequence (its 1/c of the
    // query heads and the key/value window they read). Once: the exchange buffers, the
    // head-sharded output and gradients, and the whole-sequence scores of those heads.
    const ContextAttentionShape shape = context_attention_shape(local, c, split.style);
    const KvHeadWindow window = alltoall_kv_window(shape, split.rank);
    const GqaShape heads{local.B, full_seq_len, local.NH / c, window.count, local.hs, 0, local.queries_per_kv};
    const std::size_t local_tokens = static_cast<std::size_t>(local.B) * local.T * local.hs;
    const std::size_t exchange = std::max(local.q_elements(), local_tokens * window.count * c);
    floats.saved = heads.q_elements() + 2 * heads.kv_elements();
    floats.workspace = 2 * exchange + 3 * heads.q_elements() + 2 * heads.kv_elements() + 3 * heads.score_elements();
    return floats;
}

GqaShape context_local_gqa_shape(const ModelConfig& config, int microbatch_size, int local_seq_len,
                                 const TensorSplit& split) {
    const int t = split.size;
    const int head_size = config.hidden / config.heads;
    const int query_heads = config.heads / t;
    if (config.kind != ModelKind::llama)  // multi-head attention: every query head its own key/value head
        return GqaShape{microbatch_size, local_seq_len, query_heads, query_heads, head_size, 0, 1};
    const bool kv_split = llama_kv_heads_split(config, t);
    const int kv_heads = kv_split ? config.kv_heads / t : config.kv_heads;
    return GqaShape{microbatch_size, local_seq_len, query_heads, kv_heads, head_size,
                    kv_split ? 0 : split.rank * query_heads, config.heads / config.kv_heads};
}

ContextCounterVolume context_parallel_counters(const GqaShape& local, const ContextSplit& split, int layers,
                                               int microbatches, Recompute recompute) {
    ContextCounterVolume volume;
    if (split.size <= 1) return volume;
    const ContextLayerTraffic layer = context_attention_traffic(context_attention_shape(local, split.size, split.style));
    const double passes = static_cast<double>(layers) * microbatches;
    const double forwards = recompute == Recompute::full ? 2.0 : 1.0;
    volume.bytes_sent = passes * (forwards * layer.forward.bytes_sent + layer.backward.bytes_sent);
    volume.messages = passes * (forwards * layer.forward.messages + layer.backward.messages);
    return volume;
}

TrafficByOp context_parallel_traffic(const GqaShape& local, const ContextSplit& split, int layers, int microbatches,
                                     Recompute recompute) {
    TrafficByOp traffic;
    if (split.size <= 1) return traffic;
    const ContextLayerTraffic layer = context_attention_traffic(context_attention_shape(local, split.size, split.style));
    const double passes = static_cast<double>(layers) * microbatches;
    const double forwards = recompute == Recompute::full ? 2.0 : 1.0;
    for (const auto& [pass, times] : {std::pair{&layer.forward, forwards}, std::pair{&layer.backward, 1.0}})
        for (const auto& [op, volume] : pass->by_op) {
            traffic[op].calls += passes * times * volume.calls;
            traffic[op].bytes += passes * times * volume.bytes;
        }
    return traffic;
}

}  // namespace parbench

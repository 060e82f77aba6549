#include "theory/context_parallel.hpp"

#include "theory/context_attention_buffers.hpp"
#include "theory/context_traffic.hpp"
#include "theory/model_layout.hpp"

namespace parbench {

// The sums of theory/context_attention_buffers.hpp's tables, which train/context/ring_attention.cpp
// and alltoall_attention.cpp allocate from; the train report puts them beside what the instance allocated.
ContextAttentionFloats context_attention_floats(const GqaShape& local, const ContextSplit& split, int full_seq_len) {
    if (split.size <= 1) return {};
    if (split.style == ContextStyle::ring) {
        const RingAttentionBuffers ring = ring_attention_buffers(local, split, full_seq_len);
        return {ring.saved, ring.workspace()};
    }
    const AlltoallAttentionBuffers alltoall = alltoall_attention_buffers(local, split, full_seq_len);
    return {alltoall.saved(), alltoall.workspace()};
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

#include "theory/context_traffic.hpp"

#include <algorithm>

namespace parbench {
namespace {

void add_calls(TrafficByOp& traffic, const char* op, double calls, double bytes_per_call) {
    CollectiveVolume& volume = traffic[op];
    volume.calls += calls;
    volume.bytes += calls * bytes_per_call;
}

// The key/value heads rank r's query heads read, before the windows are made equal.
KvHeadWindow kv_heads_read(const ContextAttentionShape& s, int rank) {
    const int per_rank = s.heads / s.cp;
    GqaShape mapping;
    mapping.first_query_head = s.first_query_head;
    mapping.queries_per_kv = s.queries_per_kv;
    const int first = mapping.kv_head(rank * per_rank), last = mapping.kv_head((rank + 1) * per_rank - 1);
    return {first, last - first + 1};
}

}  // namespace

ContextAttentionShape context_attention_shape(const GqaShape& local, int cp, ContextStyle style,
                                              std::size_t bytes_per_element) {
    ContextAttentionShape shape;
    shape.batch = local.B;
    shape.seq_len = local.T * cp;
    shape.heads = local.NH;
    shape.kv_heads = local.NKV;
    shape.head_size = local.hs;
    shape.first_query_head = local.first_query_head;
    shape.queries_per_kv = local.queries_per_kv;
    shape.cp = cp;
    shape.style = style;
    shape.bytes_per_element = bytes_per_element;
    return shape;
}

KvHeadWindow alltoall_kv_window(const ContextAttentionShape& s, int rank) {
    int count = 0;
    for (int r = 0; r < s.cp; ++r) count = std::max(count, kv_heads_read(s, r).count);
    // Shifted down where the window would run past the last head: still covers what is read.
    return {std::min(kv_heads_read(s, rank).first, s.kv_heads - count), count};
}

ContextLayerTraffic context_attention_traffic(const ContextAttentionShape& s) {
    ContextLayerTraffic traffic;
    const int c = s.cp;
    if (c <= 1) return traffic;
    const double local_tokens = static_cast<double>(s.batch) * (s.seq_len / c);
    const double element = static_cast<double>(s.bytes_per_element);
    if (s.style == ContextStyle::ring) {
        const double block = local_tokens * s.kv_heads * s.head_size * element;
        const auto point_to_point = [&](ContextPassTraffic& pass, double sends) {
            add_calls(pass.by_op, "send", sends, block);
            add_calls(pass.by_op, "recv", sends, block);
            pass.bytes_sent = sends * block;
            pass.messages = sends;
        };
        point_to_point(traffic.forward, 2.0 * (c - 1));
        point_to_point(traffic.backward, 2.0 * (c - 1) + 2.0 * c);
        return traffic;
    }
    const double q_buffer = local_tokens * s.heads * s.head_size * element;
    const double kv_buffer = local_tokens * c * alltoall_kv_window(s, 0).count * s.head_size * element;
    for (ContextPassTraffic* pass : {&traffic.forward, &traffic.backward}) {
        add_calls(pass->by_op, "alltoall", 2.0, q_buffer);   // q and out; dout and dq
        add_calls(pass->by_op, "alltoall", 2.0, kv_buffer);  // k and v; dk and dv
        pass->bytes_sent = (2.0 * q_buffer + 2.0 * kv_buffer) * (c - 1) / c;
        pass->messages = 4.0;
    }
    return traffic;
}

}  // namespace parbench

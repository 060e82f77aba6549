// The context-parallel group's traffic for one layer's attention and one micro-batch, per rank,
// from the shapes alone: what ContextAttention (train/context/) sends, in the byte convention
// Communicator::stats() counts. `train` puts it beside what it measured (a correct
// implementation matches exactly), `plan` predicts a layout's cp traffic with it. Per layer and
// micro-batch, with kv = B (T/c) NKV hs x bytes (one rank's K or V block) and c the cp size:
//   ring      forward   2(c-1) sends and receives of kv bytes (K and V, c-1 hops each)
//             backward  2(c-1) of K/V again and 2c of dK/dV (c-1 hops around the ring and the
//                       last one home to the block's owner)
//   alltoall  forward   4 all-to-alls: q and the output of B (T/c) NH hs elements, k and v of
//                       B (T/c) c m hs, m the key/value heads each rank receives (below)
//             backward  4: dout in, dq, dk, dv back (q, k, v stay head-sharded in the saved
//                       state, so backward does not gather them again)
// An all-to-all is counted as its whole buffer (nccl-tests' convention); the bytes that leave
// the rank are (c-1)/c of it. A group of one rank carries nothing.
#pragma once

#include <cstddef>

#include "kernels/gqa_math.hpp"
#include "theory/context_split.hpp"
#include "theory/traffic.hpp"

namespace parbench {

struct ContextAttentionShape {
    int batch = 1;              // micro-batch size B
    int seq_len = 1;            // the whole sequence T; each rank holds T / cp tokens
    int heads = 1;              // query heads per tensor-parallel rank
    int kv_heads = 1;           // key/value heads in k and v per tensor-parallel rank
    int head_size = 1;
    int first_query_head = 0;   // GqaShape's head mapping, which decides the key/value
    int queries_per_kv = 1;     // heads alltoall sends to each rank
    int cp = 1;
    ContextStyle style = ContextStyle::ring;
    std::size_t bytes_per_element = sizeof(float);
};

// The shape of a rank whose local attention is `local` (local.T = T / cp tokens).
ContextAttentionShape context_attention_shape(const GqaShape& local, int cp, ContextStyle style,
                                              std::size_t bytes_per_element = sizeof(float));

struct ContextPassTraffic {
    TrafficByOp by_op;        // "send" and "recv" (ring) or "alltoall", calls and bytes as CommStats counts
    double bytes_sent = 0.0;  // bytes leaving this rank (ContextAttentionCounters::bytes_sent)
    double messages = 0.0;    // point-to-point sends or all-to-all calls (ContextAttentionCounters::messages)
};

struct ContextLayerTraffic {
    ContextPassTraffic forward;
    ContextPassTraffic backward;
};

ContextLayerTraffic context_attention_traffic(const ContextAttentionShape& shape);

// alltoall: rank r computes query heads [r n, (r+1) n) of the rank's NH (n = NH / c) and receives
// the key/value heads [first, first + count) they read. count is the same on every rank (the
// all-to-all moves equal blocks): the most any rank's query heads span. When c divides NKV (and
// the heads are aligned, as a tensor-parallel split of both leaves them) that is NKV / c and the
// windows split the key/value heads; otherwise (fewer key/value heads than ranks, or heads
// replicated by tensor parallelism) windows overlap and a key/value head goes to every rank
// whose query heads read it, its gradients summed back on its owner.
struct KvHeadWindow {
    int first = 0;
    int count = 0;
};
KvHeadWindow alltoall_kv_window(const ContextAttentionShape& shape, int rank);

}  // namespace parbench

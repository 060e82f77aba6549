// A data-parallel scheme's settings: the ZeRO stage, buckets, overlap and AdamW's constants.
// The schemes themselves run in train/schemes/; the traffic and memory formulas read the same
// settings (theory/traffic.hpp, theory/memory.hpp).
#pragma once

#include <cstddef>

namespace parbench {

// AdamW (Loshchilov & Hutter, arXiv 1711.05101) with llm.c's defaults.
struct AdamWSettings {
    float lr = 1e-3f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float eps = 1e-8f;
    float weight_decay = 0.0f;
};

struct SchemeSettings {
    int zero_stage = 0;                      // 0: plain data parallelism
    // Gradient buckets (and ZeRO-1/2 segments); train's default is theory/memory.hpp's
    // default_bucket_bytes (smaller for ZeRO-2, whose bucket slots would otherwise hold more
    // than the shard saves).
    std::size_t bucket_bytes = 25u << 20;
    bool overlap = false;                    // launch each bucket's collective as soon as it is ready
    bool prefetch = false;                   // ZeRO-3: gather the next unit while this one computes
    int microbatches = 1;
    // DDP on a gradient group of one rank, no pipeline: each unit's AdamW runs as soon as the
    // last micro-batch's backward has completed its gradient (nothing is reduced after that),
    // while the unit's gradient and parameters are still in cache, instead of one pass over
    // every array after backward. The same arithmetic, element by element. Off where a
    // gradient changes after gradients_complete (a pipeline's tied embedding is summed
    // across stages after backward).
    bool update_in_backward = false;
    AdamWSettings adamw;
};

}  // namespace parbench

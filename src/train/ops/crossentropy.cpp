// Softmax cross-entropy on the CPU: over the whole vocabulary, and the per-shard parts a
// vocab-parallel loss combines across ranks. Backward ops accumulate (+=) into dlogits (the
// overwrite form writes it).
// Every pass over a row is a branch-free loop (softmax_term is fast_exp; sums in simd.hpp's
// fixed lane order), so they vectorise and give the same bits on every x86-64.
#include <cstddef>

#include "kernels/softmax_math.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cpu_simd.hpp"

namespace parbench {
namespace {

PARBENCH_SIMD_LOOP void crossentropy_forward_rows(float* __restrict losses, float* __restrict probs,
                                                  const float* __restrict logits, const int* __restrict targets,
                                                  std::size_t BT, std::size_t V) {
    for (std::size_t i = 0; i < BT; ++i) {
        const float* __restrict row = logits + i * V;
        const float m = simd::lane_max(row, V);
        float* __restrict p = probs + i * V;
        // one exp per logit: the terms land in probs, then are summed and normalised there
        for (std::size_t v = 0; v < V; ++v) p[v] = softmax_term(row[v], m);
        const float sum = simd::lane_sum(V, [&](std::size_t v) { return p[v]; });
        const float inverse = 1.0f / sum;
        for (std::size_t v = 0; v < V; ++v) p[v] *= inverse;
        losses[i] = crossentropy_loss(m, sum, row[targets[i]]);
    }
}

// dlogits += dloss p over the row; add_target_gradient then makes the target's term dloss (p - 1).
PARBENCH_SIMD_LOOP void add_probability_gradient(float* __restrict dlogits, const float* __restrict probs,
                                                 float dloss, std::size_t V) {
    for (std::size_t v = 0; v < V; ++v) dlogits[v] += crossentropy_logit_gradient(probs[v], false, dloss);
}

PARBENCH_SIMD_LOOP void add_shard_gradient(float* __restrict dlogits, const float* __restrict logits, float row_max,
                                           float inverse_sum, float dloss, std::size_t V) {
    for (std::size_t v = 0; v < V; ++v)
        dlogits[v] += crossentropy_logit_gradient(softmax_term(logits[v], row_max) * inverse_sum, false, dloss);
}

// add_shard_gradient's terms written instead of added (the first write into dlogits).
PARBENCH_SIMD_LOOP void set_shard_gradient(float* __restrict dlogits, const float* __restrict logits, float row_max,
                                           float inverse_sum, float dloss, std::size_t V) {
    for (std::size_t v = 0; v < V; ++v)
        dlogits[v] = crossentropy_logit_gradient(softmax_term(logits[v], row_max) * inverse_sum, false, dloss);
}

PARBENCH_SIMD_LOOP void row_maxes(float* __restrict maxes, const float* __restrict logits, std::size_t BT,
                                  std::size_t V) {
    for (std::size_t i = 0; i < BT; ++i) maxes[i] = simd::lane_max(logits + i * V, V);
}

PARBENCH_SIMD_LOOP void row_sums_exp(float* __restrict sums, const float* __restrict logits,
                                     const float* __restrict maxes, std::size_t BT, std::size_t V) {
    for (std::size_t i = 0; i < BT; ++i)
        sums[i] = simd::lane_sum(V, [&](std::size_t v) { return softmax_term(logits[i * V + v], maxes[i]); });
}

// The target's term: the loop above added dloss p; the target's gradient is dloss (p - 1).
void add_target_gradient(float* dlogits, float probability, int target, float dloss) {
    const float with_target = crossentropy_logit_gradient(probability, true, dloss);
    const float without = crossentropy_logit_gradient(probability, false, dloss);
    dlogits[target] += with_target - without;
}

}  // namespace

// losses (BT), probs (BT,V); logits (BT,V), targets (BT)
void CpuOps::crossentropy_forward(float* losses, float* probs, const float* logits, const int* targets, int BT,
                                  int V) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        crossentropy_forward_rows(losses, probs, logits, targets, static_cast<std::size_t>(BT),
                                  static_cast<std::size_t>(V));
    });
}

void CpuOps::crossentropy_backward(float* dlogits, const float* dlosses, const float* probs, const int* targets,
                                   int BT, int V) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        for (std::size_t i = 0; i < static_cast<std::size_t>(BT); ++i) {
            float* row = dlogits + i * V;
            add_probability_gradient(row, probs + i * V, dlosses[i], static_cast<std::size_t>(V));
            add_target_gradient(row, probs[i * V + targets[i]], targets[i], dlosses[i]);
        }
    });
}

void CpuOps::row_max(float* maxes, const float* logits, int BT, int V) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        row_maxes(maxes, logits, static_cast<std::size_t>(BT), static_cast<std::size_t>(V));
    });
}

void CpuOps::row_sum_exp(float* sums, const float* logits, const float* maxes, int BT, int V) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        row_sums_exp(sums, logits, maxes, static_cast<std::size_t>(BT), static_cast<std::size_t>(V));
    });
}

void CpuOps::target_logit(float* out, const float* logits, const int* targets, int BT, int V, VocabShard shard) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(BT); ++i)
        out[i] = shard.contains(targets[i]) ? logits[i * V + (targets[i] - shard.start)] : 0.0f;
}

void CpuOps::crossentropy_losses_from_parts(float* losses, const float* maxes, const float* sums,
                                            const float* target_logits, int BT) {
    for (int i = 0; i < BT; ++i) losses[i] = crossentropy_loss(maxes[i], sums[i], target_logits[i]);
}

namespace {
template <bool overwrite>
PARBENCH_SIMD_LOOP void shard_backward(float* dlogits, const float* dlosses, const float* logits, const float* maxes,
                                       const float* sums, const int* targets, int BT, int V, VocabShard shard) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(BT); ++i) {
        const float* row = logits + i * V;
        const float inverse_sum = 1.0f / sums[i];
        if constexpr (overwrite)
            set_shard_gradient(dlogits + i * V, row, maxes[i], inverse_sum, dlosses[i], static_cast<std::size_t>(V));
        else
            add_shard_gradient(dlogits + i * V, row, maxes[i], inverse_sum, dlosses[i], static_cast<std::size_t>(V));
        if (shard.contains(targets[i])) {
            const int local = targets[i] - shard.start;
            add_target_gradient(dlogits + i * V, softmax_term(row[local], maxes[i]) * inverse_sum, local, dlosses[i]);
        }
    }
}
}  // namespace

void CpuOps::crossentropy_shard_backward(float* dlogits, const float* dlosses, const float* logits,
                                         const float* maxes, const float* sums, const int* targets, int BT, int V,
                                         VocabShard shard) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        shard_backward<false>(dlogits, dlosses, logits, maxes, sums, targets, BT, V, shard);
    });
}

void CpuOps::crossentropy_shard_backward_overwrite(float* dlogits, const float* dlosses, const float* logits,
                                                   const float* maxes, const float* sums, const int* targets, int BT,
                                                   int V, VocabShard shard) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        shard_backward<true>(dlogits, dlosses, logits, maxes, sums, targets, BT, V, shard);
    });
}

}  // namespace parbench

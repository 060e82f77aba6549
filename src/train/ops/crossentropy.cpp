// Softmax cross-entropy on the CPU: over the whole vocabulary, and the per-shard parts a
// vocab-parallel loss combines across ranks. Backward ops accumulate (+=) into dlogits.
#include <algorithm>
#include <cstddef>

#include "kernels/softmax_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

float max_of(const float* row, int V) { return *std::max_element(row, row + V); }

float sum_exp(const float* row, float row_max, int V) {
    float sum = 0.0f;
    for (int v = 0; v < V; ++v) sum += softmax_term(row[v], row_max);
    return sum;
}

}  // namespace

// losses (BT), probs (BT,V); logits (BT,V), targets (BT)
void CpuOps::crossentropy_forward(float* losses, float* probs, const float* logits, const int* targets, int BT,
                                  int V) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(BT); ++i) {
        const float* row = logits + i * V;
        const float m = max_of(row, V);
        const float sum = sum_exp(row, m, V);
        float* p = probs + i * V;
        for (int v = 0; v < V; ++v) p[v] = softmax_term(row[v], m) / sum;
        losses[i] = crossentropy_loss(m, sum, row[targets[i]]);
    }
}

void CpuOps::crossentropy_backward(float* dlogits, const float* dlosses, const float* probs, const int* targets,
                                   int BT, int V) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(BT); ++i)
        for (int v = 0; v < V; ++v)
            dlogits[i * V + v] += crossentropy_logit_gradient(probs[i * V + v], v == targets[i], dlosses[i]);
}

void CpuOps::row_max(float* maxes, const float* logits, int BT, int V) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(BT); ++i) maxes[i] = max_of(logits + i * V, V);
}

void CpuOps::row_sum_exp(float* sums, const float* logits, const float* maxes, int BT, int V) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(BT); ++i) sums[i] = sum_exp(logits + i * V, maxes[i], V);
}

void CpuOps::target_logit(float* out, const float* logits, const int* targets, int BT, int V, VocabShard shard) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(BT); ++i)
        out[i] = shard.contains(targets[i]) ? logits[i * V + (targets[i] - shard.start)] : 0.0f;
}

void CpuOps::crossentropy_losses_from_parts(float* losses, const float* maxes, const float* sums,
                                            const float* target_logits, int BT) {
    for (int i = 0; i < BT; ++i) losses[i] = crossentropy_loss(maxes[i], sums[i], target_logits[i]);
}

void CpuOps::crossentropy_shard_backward(float* dlogits, const float* dlosses, const float* logits,
                                         const float* maxes, const float* sums, const int* targets, int BT, int V,
                                         VocabShard shard) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(BT); ++i) {
        const int local_target = shard.contains(targets[i]) ? targets[i] - shard.start : -1;
        for (int v = 0; v < V; ++v) {
            const float p = softmax_term(logits[i * V + v], maxes[i]) / sums[i];
            dlogits[i * V + v] += crossentropy_logit_gradient(p, v == local_target, dlosses[i]);
        }
    }
}

}  // namespace parbench

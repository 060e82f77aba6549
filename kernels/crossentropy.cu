// Softmax cross-entropy on the GPU, whole vocabulary and vocab-shard parts, with the shared
// formulas of softmax_math.hpp and gradient_write_math.hpp (probabilities as exp(x - max)
// times the row's 1 / sum, a gradient as its softmax term plus the target's correction, as the
// CPU ops compute them). A warp per row for reductions over the vocabulary, a thread per logit
// for the gradients. Backward ops accumulate (+=) into dlogits; the shard backward's
// first-write form writes it (=).
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/gradient_write_math.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"
#include "kernels/softmax_math.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

// All lanes of the calling warp get the row's max.
__device__ float row_max_of(const float* row, int V) {
    float value = -INFINITY;
    for (int v = lane(); v < V; v += 32) value = fmaxf(value, row[v]);
    return warp_max(value);
}

__device__ float row_sum_exp_of(const float* row, float row_max, int V) {
    float sum = 0.0f;
    for (int v = lane(); v < V; v += 32) sum += softmax_term(row[v], row_max);
    return warp_sum(sum);
}

__global__ void crossentropy_forward_kernel(float* losses, float* probs, const float* logits, const int* targets,
                                            int BT, int V) {
    for (std::size_t i = global_warp(); i < static_cast<std::size_t>(BT); i += grid_warps()) {
        const float* row = logits + i * V;
        const float m = row_max_of(row, V);
        const float sum = row_sum_exp_of(row, m, V);
        const float inverse_sum = 1.0f / sum;
        float* p = probs + i * V;
        for (int v = lane(); v < V; v += 32) p[v] = crossentropy_probability(row[v], m, inverse_sum);
        if (lane() == 0) losses[i] = crossentropy_loss(m, sum, row[targets[i]]);
    }
}

__global__ void crossentropy_backward_kernel(float* dlogits, const float* dlosses, const float* probs,
                                             const int* targets, int BT, int V) {
    const std::size_t count = static_cast<std::size_t>(BT) * V;
    for (std::size_t k = global_thread(); k < count; k += grid_threads()) {
        const std::size_t i = k / V;
        const int v = static_cast<int>(k % V);
        write_crossentropy_gradient<GradientWrite::accumulate>(dlogits[k], probs[k], v == targets[i], dlosses[i]);
    }
}

__global__ void row_max_kernel(float* maxes, const float* logits, int BT, int V) {
    for (std::size_t i = global_warp(); i < static_cast<std::size_t>(BT); i += grid_warps()) {
        const float m = row_max_of(logits + i * V, V);
        if (lane() == 0) maxes[i] = m;
    }
}

__global__ void row_sum_exp_kernel(float* sums, const float* logits, const float* maxes, int BT, int V) {
    for (std::size_t i = global_warp(); i < static_cast<std::size_t>(BT); i += grid_warps()) {
        const float sum = row_sum_exp_of(logits + i * V, maxes[i], V);
        if (lane() == 0) sums[i] = sum;
    }
}

__global__ void target_logit_kernel(float* out, const float* logits, const int* targets, int BT, int V,
                                    int vocab_start) {
    for (std::size_t i = global_thread(); i < static_cast<std::size_t>(BT); i += grid_threads()) {
        const int local = targets[i] - vocab_start;
        out[i] = (local >= 0 && local < V) ? logits[i * V + local] : 0.0f;
    }
}

__global__ void losses_from_parts_kernel(float* losses, const float* maxes, const float* sums,
                                         const float* target_logits, int BT) {
    for (std::size_t i = global_thread(); i < static_cast<std::size_t>(BT); i += grid_threads())
        losses[i] = crossentropy_loss(maxes[i], sums[i], target_logits[i]);
}

template <GradientWrite write>
__global__ void crossentropy_shard_backward_kernel(float* dlogits, const float* dlosses, const float* logits,
                                                   const float* maxes, const float* sums, const int* targets, int BT,
                                                   int V, int vocab_start) {
    const std::size_t count = static_cast<std::size_t>(BT) * V;
    for (std::size_t k = global_thread(); k < count; k += grid_threads()) {
        const std::size_t i = k / V;
        const int v = static_cast<int>(k % V);
        const float p = crossentropy_probability(logits[k], maxes[i], 1.0f / sums[i]);
        write_crossentropy_gradient<write>(dlogits[k], p, v == targets[i] - vocab_start, dlosses[i]);
    }
}

}  // namespace

void launch_crossentropy_forward(float* losses, float* probs, const float* logits, const int* targets, int BT, int V,
                                 GpuStream stream) {
    NvtxRange range("crossentropy_forward");
    crossentropy_forward_kernel<<<blocks_for_rows(BT), threads_per_block, 0, stream>>>(losses, probs, logits, targets,
                                                                                       BT, V);
    check_cuda(cudaGetLastError(), "crossentropy_forward_kernel launch");
}

void launch_crossentropy_backward(float* dlogits, const float* dlosses, const float* probs, const int* targets,
                                  int BT, int V, GpuStream stream) {
    NvtxRange range("crossentropy_backward");
    crossentropy_backward_kernel<<<blocks_for(static_cast<std::size_t>(BT) * V), threads_per_block, 0, stream>>>(
        dlogits, dlosses, probs, targets, BT, V);
    check_cuda(cudaGetLastError(), "crossentropy_backward_kernel launch");
}

void launch_row_max(float* maxes, const float* logits, int BT, int V, GpuStream stream) {
    NvtxRange range("row_max");
    row_max_kernel<<<blocks_for_rows(BT), threads_per_block, 0, stream>>>(maxes, logits, BT, V);
    check_cuda(cudaGetLastError(), "row_max_kernel launch");
}

void launch_row_sum_exp(float* sums, const float* logits, const float* maxes, int BT, int V, GpuStream stream) {
    NvtxRange range("row_sum_exp");
    row_sum_exp_kernel<<<blocks_for_rows(BT), threads_per_block, 0, stream>>>(sums, logits, maxes, BT, V);
    check_cuda(cudaGetLastError(), "row_sum_exp_kernel launch");
}

void launch_target_logit(float* out, const float* logits, const int* targets, int BT, int V, int vocab_start,
                         GpuStream stream) {
    NvtxRange range("target_logit");
    target_logit_kernel<<<blocks_for(BT), threads_per_block, 0, stream>>>(out, logits, targets, BT, V, vocab_start);
    check_cuda(cudaGetLastError(), "target_logit_kernel launch");
}

void launch_crossentropy_losses_from_parts(float* losses, const float* maxes, const float* sums,
                                           const float* target_logits, int BT, GpuStream stream) {
    NvtxRange range("crossentropy_losses_from_parts");
    losses_from_parts_kernel<<<blocks_for(BT), threads_per_block, 0, stream>>>(losses, maxes, sums, target_logits, BT);
    check_cuda(cudaGetLastError(), "losses_from_parts_kernel launch");
}

void launch_crossentropy_shard_backward(float* dlogits, const float* dlosses, const float* logits,
                                        const float* maxes, const float* sums, const int* targets, int BT, int V,
                                        int vocab_start, GradientWrite write, GpuStream stream) {
    const unsigned blocks = blocks_for(static_cast<std::size_t>(BT) * V);
    if (write == GradientWrite::overwrite) {
        NvtxRange range("crossentropy_shard_backward_overwrite");
        crossentropy_shard_backward_kernel<GradientWrite::overwrite><<<blocks, threads_per_block, 0, stream>>>(
            dlogits, dlosses, logits, maxes, sums, targets, BT, V, vocab_start);
    } else {
        NvtxRange range("crossentropy_shard_backward");
        crossentropy_shard_backward_kernel<GradientWrite::accumulate><<<blocks, threads_per_block, 0, stream>>>(
            dlogits, dlosses, logits, maxes, sums, targets, BT, V, vocab_start);
    }
    check_cuda(cudaGetLastError(), "crossentropy_shard_backward_kernel launch");
}

}  // namespace parbench

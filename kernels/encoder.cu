// Token + position embedding on the GPU, whole vocabulary or one shard [vocab_start,
// vocab_start + vocab_size). Backward accumulates (+=): dwte with atomics, because several
// positions may share a token (so its summation order, and last bits, vary run to run);
// dwpe with a thread per (t, c) walking the batch, deterministic.
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__device__ inline bool in_shard(int token, int vocab_start, int vocab_size) {
    return token >= vocab_start && token - vocab_start < vocab_size;
}

__global__ void encoder_forward_kernel(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T,
                                       int C, int vocab_start, int vocab_size) {
    const std::size_t count = static_cast<std::size_t>(B) * T * C;
    for (std::size_t i = global_thread(); i < count; i += grid_threads()) {
        const std::size_t bt = i / C;
        const std::size_t c = i % C;
        const int token = tokens[bt];
        float value = in_shard(token, vocab_start, vocab_size) ? wte[(token - vocab_start) * static_cast<std::size_t>(C) + c]
                                                               : 0.0f;
        if (wpe != nullptr) value += wpe[(bt % T) * C + c];
        out[i] = value;
    }
}

__global__ void token_embedding_backward_kernel(float* dwte, const float* dout, const int* tokens, int B, int T, int C,
                                                int vocab_start, int vocab_size) {
    const std::size_t count = static_cast<std::size_t>(B) * T * C;
    for (std::size_t i = global_thread(); i < count; i += grid_threads()) {
        const int token = tokens[i / C];
        if (in_shard(token, vocab_start, vocab_size))
            atomicAdd(&dwte[(token - vocab_start) * static_cast<std::size_t>(C) + i % C], dout[i]);
    }
}

__global__ void position_embedding_backward_kernel(float* dwpe, const float* dout, int B, int T, int C) {
    const std::size_t count = static_cast<std::size_t>(T) * C;
    for (std::size_t i = global_thread(); i < count; i += grid_threads()) {
        float sum = 0.0f;
        for (std::size_t b = 0; b < static_cast<std::size_t>(B); ++b) sum += dout[b * count + i];
        dwpe[i] += sum;
    }
}

}  // namespace

void launch_encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C,
                            int vocab_start, int vocab_size, GpuStream stream) {
    NvtxRange range("encoder_forward");
    encoder_forward_kernel<<<blocks_for(static_cast<std::size_t>(B) * T * C), threads_per_block, 0, stream>>>(
        out, tokens, wte, wpe, B, T, C, vocab_start, vocab_size);
    check_cuda(cudaGetLastError(), "encoder_forward_kernel launch");
}

void launch_encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C,
                             int vocab_start, int vocab_size, GpuStream stream) {
    NvtxRange range("encoder_backward");
    token_embedding_backward_kernel<<<blocks_for(static_cast<std::size_t>(B) * T * C), threads_per_block, 0,
                                      stream>>>(dwte, dout, tokens, B, T, C, vocab_start, vocab_size);
    check_cuda(cudaGetLastError(), "token_embedding_backward_kernel launch");
    if (dwpe == nullptr) return;
    position_embedding_backward_kernel<<<blocks_for(static_cast<std::size_t>(T) * C), threads_per_block, 0, stream>>>(
        dwpe, dout, B, T, C);
    check_cuda(cudaGetLastError(), "position_embedding_backward_kernel launch");
}

}  // namespace parbench

// A mixture-of-experts layer's routing, permutation and combine on the GPU, with the shared
// per-token and per-element functions of moe_router_math.hpp and moe_dispatch_math.hpp (the
// CPU ops run the same ones, train/ops/moe.cpp). Shapes and conventions: ops.hpp's "mixture
// of experts" block. Simple kernels, one thread per token, assignment or element: they are a
// small part of an MoE layer next to its GEMMs (cuBLAS) and its all-to-alls (NCCL).
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/moe_dispatch_math.hpp"
#include "kernels/moe_router_math.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

// One thread per token: scores (N,E), chosen (N,k), weights (N,k).
__global__ void moe_route_kernel(float* scores, int* chosen, float* weights, const float* logits, const float* bias,
                                 int N, int E, int k, MoeScore score) {
    for (std::size_t t = global_thread(); t < static_cast<std::size_t>(N); t += grid_threads())
        moe_route_token(scores + t * E, chosen + t * k, weights + t * k, logits + t * E, bias, E, k, score);
}

// One thread per element of the (N·k, C) assignments' rows: each kept row copied to its slot.
__global__ void moe_dispatch_kernel(float* dispatched, const float* x, const int* slot, int N, int k, int C) {
    const std::size_t n = static_cast<std::size_t>(N) * k * C;
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
        const std::size_t a = i / C, c = i % C;
        const int s = slot[a];
        if (s >= 0) dispatched[static_cast<std::size_t>(s) * C + c] = x[(a / k) * C + c];
    }
}

// One thread per element of out (N,C).
__global__ void moe_combine_kernel(float* out, const float* expert_out, const int* slot, const float* weights, int N,
                                   int k, int C) {
    const std::size_t n = static_cast<std::size_t>(N) * C;
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
        const std::size_t t = i / C;
        out[i] = moe_combine_element(out[i], expert_out, slot + t * k, weights + t * k, k, C, static_cast<int>(i % C));
    }
}

// One thread per assignment: its weight's gradient (a dot product over C) and its row of
// dexpert_out.
__global__ void moe_combine_backward_kernel(float* dexpert_out, float* dweights, const float* dout,
                                            const float* expert_out, const int* slot, const float* weights, int N,
                                            int k, int C) {
    const std::size_t assignments = static_cast<std::size_t>(N) * k;
    for (std::size_t a = global_thread(); a < assignments; a += grid_threads()) {
        if (slot[a] < 0) {
            dweights[a] = 0.0f;
            continue;
        }
        const std::size_t row = static_cast<std::size_t>(slot[a]) * C;
        dweights[a] = moe_combine_backward_assignment(dexpert_out + row, dout + (a / k) * C, expert_out + row,
                                                      weights[a], C);
    }
}

// One thread per element of dx (N,C).
__global__ void moe_dispatch_backward_kernel(float* dx, const float* ddispatched, const int* slot, int N, int k,
                                             int C) {
    const std::size_t n = static_cast<std::size_t>(N) * C;
    for (std::size_t i = global_thread(); i < n; i += grid_threads())
        dx[i] = moe_dispatch_backward_element(dx[i], ddispatched, slot + (i / C) * k, k, C, static_cast<int>(i % C));
}

// One block per token (grid-stride over tokens): the block writes the E balancing
// coefficients into shared memory and zeroes the token's row, then one thread runs the
// token's backward, the same sequential code the CPU runs.
__global__ void moe_route_backward_kernel(float* dlogits, const float* dweights, const float* scores,
                                          const float* weights, const int* chosen, const int* routed,
                                          double balance_weight, int N, int E, int k, MoeScore score) {
    extern __shared__ float coefficients[];  // (E)
    for (int e = threadIdx.x; e < E; e += blockDim.x)
        coefficients[e] = moe_balance_coefficient(balance_weight, E, routed[e], N, k);
    for (std::size_t t = blockIdx.x; t < static_cast<std::size_t>(N); t += gridDim.x) {
        float* d = dlogits + t * E;
        for (int e = threadIdx.x; e < E; e += blockDim.x) d[e] = 0.0f;
        __syncthreads();
        if (threadIdx.x == 0) {
            moe_weights_backward(d, dweights + t * k, weights + t * k, scores + t * E, chosen + t * k, k, score);
            if (balance_weight != 0.0) moe_balance_backward(d, coefficients, scores + t * E, E, score);
        }
        __syncthreads();
    }
}

// The route backward's blocks: few threads each, most of the work is one thread's.
constexpr unsigned route_backward_threads = 32;

}  // namespace

void launch_moe_route(float* scores, int* chosen, float* weights, const float* logits, const float* bias, int N, int E,
                      int k, MoeScore score, GpuStream stream) {
    NvtxRange range("moe_route");
    moe_route_kernel<<<blocks_for(static_cast<std::size_t>(N)), threads_per_block, 0, stream>>>(
        scores, chosen, weights, logits, bias, N, E, k, score);
    check_cuda(cudaGetLastError(), "moe_route_kernel launch");
}

void launch_moe_dispatch(float* dispatched, const float* x, const int* slot, int N, int k, int C, GpuStream stream) {
    NvtxRange range("moe_dispatch");
    moe_dispatch_kernel<<<blocks_for(static_cast<std::size_t>(N) * k * C), threads_per_block, 0, stream>>>(
        dispatched, x, slot, N, k, C);
    check_cuda(cudaGetLastError(), "moe_dispatch_kernel launch");
}

void launch_moe_combine(float* out, const float* expert_out, const int* slot, const float* weights, int N, int k, int C,
                        GpuStream stream) {
    NvtxRange range("moe_combine");
    moe_combine_kernel<<<blocks_for(static_cast<std::size_t>(N) * C), threads_per_block, 0, stream>>>(
        out, expert_out, slot, weights, N, k, C);
    check_cuda(cudaGetLastError(), "moe_combine_kernel launch");
}

void launch_moe_combine_backward(float* dexpert_out, float* dweights, const float* dout, const float* expert_out,
                                 const int* slot, const float* weights, int N, int k, int C, GpuStream stream) {
    NvtxRange range("moe_combine_backward");
    moe_combine_backward_kernel<<<blocks_for(static_cast<std::size_t>(N) * k), threads_per_block, 0, stream>>>(
        dexpert_out, dweights, dout, expert_out, slot, weights, N, k, C);
    check_cuda(cudaGetLastError(), "moe_combine_backward_kernel launch");
}

void launch_moe_dispatch_backward(float* dx, const float* ddispatched, const int* slot, int N, int k, int C,
                                  GpuStream stream) {
    NvtxRange range("moe_dispatch_backward");
    moe_dispatch_backward_kernel<<<blocks_for(static_cast<std::size_t>(N) * C), threads_per_block, 0, stream>>>(
        dx, ddispatched, slot, N, k, C);
    check_cuda(cudaGetLastError(), "moe_dispatch_backward_kernel launch");
}

void launch_moe_route_backward(float* dlogits, const float* dweights, const float* scores, const float* weights,
                               const int* chosen, const int* routed, double balance_weight, int N, int E, int k,
                               MoeScore score, GpuStream stream) {
    NvtxRange range("moe_route_backward");
    const unsigned blocks = static_cast<unsigned>(std::clamp<std::size_t>(static_cast<std::size_t>(N), 1, max_blocks));
    moe_route_backward_kernel<<<blocks, route_backward_threads, static_cast<std::size_t>(E) * sizeof(float), stream>>>(
        dlogits, dweights, scores, weights, chosen, routed, balance_weight, N, E, k, score);
    check_cuda(cudaGetLastError(), "moe_route_backward_kernel launch");
}

}  // namespace parbench

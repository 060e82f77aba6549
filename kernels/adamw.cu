// AdamW on the GPU with the shared per-element step of adamw_math.hpp; fp32 state in place.
// The clearing form zeroes each gradient in the pass that reads it (Ops::
// adamw_update_clearing_grads): one read-modify-write of the gradient instead of the update's
// read and a separate fill's write, and one launch instead of two.
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/adamw_math.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, std::size_t n,
                             AdamWHyper hyper) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) adamw_step(params[i], grads[i], m[i], v[i], hyper);
}

__global__ void adamw_clearing_kernel(float* params, float* grads, float* m, float* v, std::size_t n,
                                      AdamWHyper hyper) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
        adamw_step(params[i], grads[i], m[i], v[i], hyper);
        grads[i] = 0.0f;
    }
}

}  // namespace

void launch_adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr, float beta1,
                         float beta2, float eps, float weight_decay, int step, GpuStream stream) {
    NvtxRange range("adamw_update");
    // bias corrections once on the host, as the CPU op does, so both round the same way
    const AdamWHyper hyper = adamw_hyper(lr, beta1, beta2, eps, weight_decay, step);
    adamw_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(params, grads, m, v, n, hyper);
    check_cuda(cudaGetLastError(), "adamw_kernel launch");
}

void launch_adamw_update_clearing_grads(float* params, float* grads, float* m, float* v, std::size_t n, float lr,
                                        float beta1, float beta2, float eps, float weight_decay, int step,
                                        GpuStream stream) {
    NvtxRange range("adamw_update_clearing_grads");
    const AdamWHyper hyper = adamw_hyper(lr, beta1, beta2, eps, weight_decay, step);
    adamw_clearing_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(params, grads, m, v, n, hyper);
    check_cuda(cudaGetLastError(), "adamw_clearing_kernel launch");
}

}  // namespace parbench

// AdamW on the CPU: fp32 parameters, gradients and moments, updated in place in one pass over
// the four arrays (a branch-free loop the compiler vectorises).
#include "kernels/adamw_math.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cpu_simd.hpp"

namespace parbench {
namespace {

PARBENCH_SIMD_LOOP void adamw_loop(float* __restrict params, const float* __restrict grads, float* __restrict m,
                                   float* __restrict v, std::size_t n, AdamWHyper hyper) {
    for (std::size_t i = 0; i < n; ++i) adamw_step(params[i], grads[i], m[i], v[i], hyper);
}

PARBENCH_SIMD_LOOP void adamw_clearing_loop(float* __restrict params, float* __restrict grads,
                                            float* __restrict m, float* __restrict v, std::size_t n,
                                            AdamWHyper hyper) {
    for (std::size_t i = 0; i < n; ++i) {
        adamw_step(params[i], grads[i], m[i], v[i], hyper);
        grads[i] = 0.0f;
    }
}

}  // namespace

void CpuOps::adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                          float beta1, float beta2, float eps, float weight_decay, int step) {
    const AdamWHyper hyper = adamw_hyper(lr, beta1, beta2, eps, weight_decay, step);
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY { adamw_loop(params, grads, m, v, n, hyper); });
}

void CpuOps::adamw_update_clearing_grads(float* params, float* grads, float* m, float* v, std::size_t n, float lr,
                                         float beta1, float beta2, float eps, float weight_decay, int step) {
    const AdamWHyper hyper = adamw_hyper(lr, beta1, beta2, eps, weight_decay, step);
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY { adamw_clearing_loop(params, grads, m, v, n, hyper); });
}

}  // namespace parbench

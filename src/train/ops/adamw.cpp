// AdamW on the CPU: fp32 parameters, gradients and moments, updated in place.
#include "kernels/adamw_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {

void CpuOps::adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                          float beta1, float beta2, float eps, float weight_decay, int step) {
    const AdamWHyper hyper = adamw_hyper(lr, beta1, beta2, eps, weight_decay, step);
    for (std::size_t i = 0; i < n; ++i) adamw_step(params[i], grads[i], m[i], v[i], hyper);
}

}  // namespace parbench

// One AdamW step for one parameter (Loshchilov & Hutter, arXiv 1711.05101, Algorithm 2;
// PyTorch's torch.optim.AdamW): moments with bias correction, and weight decay decoupled
// from the gradient, applied to the parameter directly:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p = p - lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * p )
// computed as PyTorch's AdamW orders it: the decay first, p *= 1 - lr wd, then
// p -= (lr / (1-b1^t)) m / (sqrt(v) / sqrt(1-b2^t) + eps). The per-step scalars are folded on
// the host, so an element costs one square root and one division: the divider is what bounds
// this loop on a CPU core (three divisions and a root took twice the time of its memory traffic).
#pragma once

#include <cmath>

#include "host_device.hpp"

namespace parbench {

struct AdamWHyper {
    float beta1;
    float beta2;
    float eps;
    float decay_factor;             // 1 - lr * weight_decay
    float step_size;                // lr / (1 - beta1^step)
    float inverse_sqrt_correction;  // 1 / sqrt(1 - beta2^step)
};

PARBENCH_HD AdamWHyper adamw_hyper(float lr, float beta1, float beta2, float eps, float weight_decay, int step) {
    const float beta1_correction = 1.0f - powf(beta1, static_cast<float>(step));
    const float beta2_correction = 1.0f - powf(beta2, static_cast<float>(step));
    return AdamWHyper{beta1,
                      beta2,
                      eps,
                      1.0f - lr * weight_decay,
                      lr / beta1_correction,
                      1.0f / sqrtf(beta2_correction)};
}

PARBENCH_HD void adamw_step(float& param, float grad, float& m, float& v, const AdamWHyper& h) {
    m = h.beta1 * m + (1.0f - h.beta1) * grad;
    v = h.beta2 * v + (1.0f - h.beta2) * grad * grad;
    const float denominator = sqrtf(v) * h.inverse_sqrt_correction + h.eps;
    param = param * h.decay_factor - h.step_size * (m / denominator);
}

}  // namespace parbench

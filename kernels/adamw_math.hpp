// One AdamW step for one parameter (Loshchilov & Hutter, arXiv 1711.05101, Algorithm 2;
// PyTorch's torch.optim.AdamW): moments with bias correction, and weight decay decoupled
// from the gradient, applied to the parameter directly:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p = p - lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * p )
#pragma once

#include <cmath>

#include "host_device.hpp"

namespace parbench {

struct AdamWHyper {
    float lr;
    float beta1;
    float beta2;
    float eps;
    float weight_decay;
    float beta1_correction;  // 1 - beta1^step, computed once per step on the host
    float beta2_correction;  // 1 - beta2^step
};

PARBENCH_HD AdamWHyper adamw_hyper(float lr, float beta1, float beta2, float eps, float weight_decay, int step) {
    return AdamWHyper{lr,
                      beta1,
                      beta2,
                      eps,
                      weight_decay,
                      1.0f - powf(beta1, static_cast<float>(step)),
                      1.0f - powf(beta2, static_cast<float>(step))};
}

PARBENCH_HD void adamw_step(float& param, float grad, float& m, float& v, const AdamWHyper& h) {
    m = h.beta1 * m + (1.0f - h.beta1) * grad;
    v = h.beta2 * v + (1.0f - h.beta2) * grad * grad;
    const float m_hat = m / h.beta1_correction;
    const float v_hat = v / h.beta2_correction;
    param -= h.lr * (m_hat / (sqrtf(v_hat) + h.eps) + h.weight_decay * param);
}

}  // namespace parbench

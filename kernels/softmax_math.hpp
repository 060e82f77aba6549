// Softmax and cross-entropy pieces shared by attention and the loss, on CPU and GPU.
// Softmax is computed as exp(x - max) / sum so that it never overflows; cross-entropy as
// log(sum exp(x - max)) + max - x_target, which is also how a vocabulary split across ranks
// combines its per-rank max, sum and target logit (Megatron-LM, arXiv 1909.08053, sec. 3).
#pragma once

#include <cmath>

#include "fast_exp_math.hpp"
#include "host_device.hpp"

namespace parbench {

// Scaled dot-product attention's 1/sqrt(d_k) (Vaswani et al., arXiv 1706.03762, eq. 1).
PARBENCH_HD float attention_scale(int head_size) { return 1.0f / sqrtf(static_cast<float>(head_size)); }

// exp(x - max): the unnormalised softmax term, never above 1 (fast_exp: vectorisable loops).
PARBENCH_HD float softmax_term(float x, float row_max) { return fast_exp(x - row_max); }

// d x_i of y = softmax(x), given dy and sum_j y_j dy_j:  y_i (dy_i - sum_j y_j dy_j).
PARBENCH_HD float softmax_input_gradient(float y, float dy, float sum_y_dy) { return y * (dy - sum_y_dy); }

// -log softmax(x)[target] from the row's max, its sum of exp(x - max) and the target's logit.
PARBENCH_HD float crossentropy_loss(float row_max, float sum_exp, float target_logit) {
    return logf(sum_exp) + row_max - target_logit;
}

// d logit_i of the loss: dloss * (p_i - [i == target]).
PARBENCH_HD float crossentropy_logit_gradient(float probability, bool is_target, float dloss) {
    return dloss * (probability - (is_target ? 1.0f : 0.0f));
}

}  // namespace parbench

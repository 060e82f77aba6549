// The per-element values of the backward ops that have a first-write form (Ops' "first
// writes", src/train/ops/ops.hpp), and how a value lands in its gradient: added (+=, the ops'
// convention) or written (=, an input gradient's first contribution in a step, which then
// needs no fill(0) before it: 0 + x is x, so both give the same result on a zeroed buffer).
// The CUDA kernels call these; tests/ops/gradient_write_math_test.cpp holds each to the CPU
// op bit for bit, so the CPU tests check the formulas the GPU runs. The operand order of each
// product is the CPU loops' (src/train/ops/{gelu,swiglu,crossentropy}.cpp), which matters for
// bit-exactness: float products do not associate.
#pragma once

#include "gelu_math.hpp"
#include "host_device.hpp"
#include "softmax_math.hpp"
#include "swiglu_math.hpp"

namespace parbench {

enum class GradientWrite { accumulate, overwrite };

template <GradientWrite write>
PARBENCH_HD void write_gradient(float& gradient, float value) {
    if constexpr (write == GradientWrite::overwrite)
        gradient = value;
    else
        gradient += value;
}

// GELU backward: d inp = gelu'(inp) dout.
PARBENCH_HD float gelu_input_gradient(float inp, float dout) { return gelu_derivative(inp) * dout; }

// SwiGLU backward (swiglu_math.hpp): d gate = dout up silu'(gate), d up = dout silu(gate).
PARBENCH_HD float swiglu_gate_gradient(float dout, float gate, float up) {
    return dout * up * silu_derivative(gate);
}
PARBENCH_HD float swiglu_up_gradient(float dout, float gate) { return dout * silu(gate); }

// Cross-entropy's gradient of one logit, dloss (p - [target]), in two terms as the CPU op adds
// them: the softmax term dloss p of every logit, then at the target the correction from
// dloss p to dloss (p - 1). p = exp(logit - row_max) / sum is taken as a product with the
// row's 1 / sum, computed once per row.
PARBENCH_HD float crossentropy_probability(float logit, float row_max, float inverse_sum) {
    return softmax_term(logit, row_max) * inverse_sum;
}
PARBENCH_HD float crossentropy_target_correction(float probability, float dloss) {
    return crossentropy_logit_gradient(probability, true, dloss) - crossentropy_logit_gradient(probability, false, dloss);
}

// One logit's gradient from its probability, landed in dlogit: the softmax term, then, when
// the logit is the target's, the correction (two roundings, in the CPU op's order).
template <GradientWrite write>
PARBENCH_HD void write_crossentropy_gradient(float& dlogit, float probability, bool is_target, float dloss) {
    float value = dlogit;
    write_gradient<write>(value, crossentropy_logit_gradient(probability, false, dloss));
    if (is_target) value += crossentropy_target_correction(probability, dloss);
    dlogit = value;
}

}  // namespace parbench

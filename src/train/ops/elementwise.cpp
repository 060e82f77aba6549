// Elementwise helpers on the CPU: residual sums, gradient accumulation, scaling, filling.
#include <algorithm>

#include "train/ops/cpu_ops.hpp"

namespace parbench {

void CpuOps::residual_forward(float* out, const float* a, const float* b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void CpuOps::add_inplace(float* acc, const float* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
}

void CpuOps::scale(float* x, float factor, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) x[i] *= factor;
}

void CpuOps::fill(float* x, float value, std::size_t n) { std::fill(x, x + n, value); }

}  // namespace parbench

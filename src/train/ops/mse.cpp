// Mean squared error per row on the CPU. Backward accumulates (+=) into dpred.
#include <cstddef>

#include "kernels/mse_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {

// losses (N); pred, target (N,D)
void CpuOps::mse_forward(float* losses, const float* pred, const float* target, int N, int D) {
    for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n) {
        float sum = 0.0f;
        for (int d = 0; d < D; ++d) sum += squared_error(pred[n * D + d], target[n * D + d]);
        losses[n] = sum / D;
    }
}

void CpuOps::mse_backward(float* dpred, const float* dlosses, const float* pred, const float* target, int N, int D) {
    for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n)
        for (int d = 0; d < D; ++d) {
            const std::size_t i = n * D + d;
            dpred[i] += mse_pred_gradient(pred[i], target[i], D, dlosses[n]);
        }
}

}  // namespace parbench

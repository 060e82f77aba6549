// Mean squared error per row: loss_n = (1/D) sum_d (pred - target)^2. The training loss is the
// mean of the rows (the engine scales dlosses by 1/N), as cross-entropy is.
#pragma once

#include "host_device.hpp"

namespace parbench {

PARBENCH_HD float squared_error(float pred, float target) {
    const float diff = pred - target;
    return diff * diff;
}

// d pred of loss_n, given d loss_n.
PARBENCH_HD float mse_pred_gradient(float pred, float target, int row_size, float dloss) {
    return dloss * 2.0f * (pred - target) / static_cast<float>(row_size);
}

}  // namespace parbench

// Why a training run's loss went NaN or infinite, and what to change: the error line and the
// failed report's status_reason. After an update the learning rate is the usual cause; at the
// first step, before any update, it cannot be (issue 32: a rope_theta of 1e-300 gave NaN at
// step 1 and the message said to lower --lr), so the line names what the first step's float
// arithmetic takes from the model config instead.
#pragma once

#include <string>

#include "theory/model_config.hpp"
#include "train/train_run.hpp"

namespace parbench {

// `lr`: --lr, named when it can be the cause; `checked`: --check was asked for (it did not compare).
std::string divergence_reason(const StepProgress& at, const ModelConfig& model, double lr, bool checked);

}  // namespace parbench

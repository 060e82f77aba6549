// The rules a layout's factors must keep, checked in one place for `train` and `plan` so that
// the two refuse the same layouts with the same words. Each throws UsageError naming the flag
// and the fix.
#pragma once

#include "theory/model_config.hpp"
#include "theory/tensor_split.hpp"

namespace parbench {

// Tensor parallelism over `tp` ranks (with sequence parallelism when `sp`, in `style`) of
// `model`, whose ranks hold `local_seq` tokens of each sequence (seq / cp under context
// parallelism over `cp` ranks): every split must come out even.
void check_tensor_split(const ModelConfig& model, int tp, bool sp, TensorParallelStyle style, int local_seq, int cp);

}  // namespace parbench

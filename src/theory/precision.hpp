// The matmuls' precision (train/matmuls.hpp: parameters, gradients and AdamW state stay fp32) and
// the shape of one matmul, which sizes the bf16 operand copies.
#pragma once

#include <string>

namespace parbench {

enum class Precision { fp32, bf16 };
// "fp32" or "bf16"; UsageError for anything else.
Precision parse_precision(const std::string& name);
std::string precision_name(Precision precision);  // "fp32", "bf16"

// One matmul a model runs: inp (N,C) · weight (OC,C)ᵀ.
struct MatmulShape {
    int N = 0;
    int C = 0;
    int OC = 0;
};

}  // namespace parbench

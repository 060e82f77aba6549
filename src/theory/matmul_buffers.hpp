// The bf16 operand copies of train/matmuls.hpp, with their sizes (llm.c's size table, as
// theory/transformer_buffers.hpp for the frame): under --precision bf16 one copy of the input,
// the weight and the output gradient of the largest matmul a model runs, each rounded to bf16
// before the multiply; the ops run in order on one stream, so one set serves every call.
// train/matmuls.cpp allocates exactly these and the memory theory (theory/memory.cpp) sums
// them. Sizes in bf16 elements (2 bytes); none under fp32.
#pragma once

#include <cstddef>
#include <vector>

#include "theory/precision.hpp"

namespace parbench {

struct Bf16OperandBuffers {
    std::size_t input = 0;            // max N·C over the shapes
    std::size_t weight = 0;           // max OC·C
    std::size_t output_gradient = 0;  // max N·OC
    static constexpr std::size_t element_bytes = 2;
    std::size_t bytes() const { return (input + weight + output_gradient) * element_bytes; }
};

// `shapes`: every matmul the model runs (its layers', its head's, its experts').
Bf16OperandBuffers bf16_operand_buffers(Precision precision, const std::vector<MatmulShape>& shapes);

}  // namespace parbench

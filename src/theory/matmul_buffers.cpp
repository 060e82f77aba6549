#include "theory/matmul_buffers.hpp"

#include <algorithm>

namespace parbench {

Bf16OperandBuffers bf16_operand_buffers(Precision precision, const std::vector<MatmulShape>& shapes) {
    Bf16OperandBuffers b;
    if (precision != Precision::bf16) return b;
    for (const MatmulShape& s : shapes) {
        const auto N = static_cast<std::size_t>(s.N), C = static_cast<std::size_t>(s.C),
                   OC = static_cast<std::size_t>(s.OC);
        b.input = std::max(b.input, N * C);
        b.weight = std::max(b.weight, OC * C);
        b.output_gradient = std::max(b.output_gradient, N * OC);
    }
    return b;
}

}  // namespace parbench

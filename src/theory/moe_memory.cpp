#include "theory/moe_memory.hpp"

#include <algorithm>

namespace parbench {
namespace {
constexpr std::size_t element_bytes = 4;  // fp32 and int32 alike
}

std::size_t moe_dispatch_buffer_bytes(const MoeMemoryShape& s) {
    return 2 * s.tokens * s.top_k * s.hidden * element_bytes;
}

std::size_t moe_kept_bytes(const MoeMemoryShape& s) {
    const std::size_t N = s.tokens, k = s.top_k;
    const std::size_t R = s.expert_rows();
    const std::size_t w = s.wide_buffers();
    std::size_t elements = N * s.experts + 3 * N * k + (2 * s.experts + 1) + w * R * s.routed_hidden() +
                           w * N * s.shared_experts * s.expert_hidden;
    if (s.ep > 1) elements += 2 * R * s.hidden + s.experts;
    return elements * element_bytes + moe_dispatch_buffer_bytes(s);
}

std::size_t moe_sequence_parallel_pack_floats(const MoeMemoryShape& s) {
    return s.experts * s.hidden + ((s.experts / s.ep) * s.routed_hidden() + s.shared_experts * s.expert_hidden) *
                                      s.wide_buffers() * s.hidden;
}

std::vector<MatmulShape> moe_expert_matmul_shapes(const MoeMemoryShape& s) {
    const int rows = static_cast<int>(s.expert_rows()), N = static_cast<int>(s.tokens), C = static_cast<int>(s.hidden);
    const int Fe = static_cast<int>(s.routed_hidden()), SFe = static_cast<int>(s.shared_experts * s.expert_hidden);
    std::vector<MatmulShape> shapes{{rows, C, Fe}, {rows, Fe, C}};
    if (SFe > 0) {
        shapes.push_back({N, C, SFe});
        shapes.push_back({N, SFe, C});
    }
    return shapes;
}

std::size_t moe_scratch_bytes(const MoeMemoryShape& s) {
    const std::size_t N = s.tokens, k = s.top_k;
    const std::size_t R = s.expert_rows();
    const std::size_t widest = std::max(R * s.routed_hidden(), N * s.shared_experts * s.expert_hidden);
    const std::size_t exchange = s.ep > 1 ? 2 * R * s.hidden : 0;
    const std::size_t expert_tensor_sum = s.etp > 1 ? N * s.hidden : 0;
    return (2 * N * s.experts + N * k + 2 * N * k * s.hidden + exchange + s.wide_buffers() * widest +
            expert_tensor_sum) *
           element_bytes;
}

}  // namespace parbench

#include "theory/moe_memory.hpp"

#include "theory/moe_buffers.hpp"

namespace parbench {
namespace {
constexpr std::size_t element_bytes = 4;  // fp32 and int32 alike
}

// The byte counts are sums of the buffer table train/moe/ allocates (theory/moe_buffers.hpp).
std::size_t moe_dispatch_buffer_bytes(const MoeMemoryShape& s) {
    const MoeKeptBuffers kept = moe_kept_buffers(s);
    return (kept.dispatched + kept.expert_out) * element_bytes;
}

std::size_t moe_kept_bytes(const MoeMemoryShape& s) { return moe_kept_buffers(s).total() * element_bytes; }

std::size_t moe_scratch_bytes(const MoeMemoryShape& s) { return moe_scratch_buffers(s).total() * element_bytes; }

std::size_t moe_sequence_parallel_pack_floats(const MoeMemoryShape& s) { return moe_gradient_pack_buffers(s).total(); }

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

}  // namespace parbench

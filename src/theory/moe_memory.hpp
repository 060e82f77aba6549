// What the training engine's MoE layer (train/moe/moe_layer.hpp) holds in memory, in fp32
// elements of 4 bytes (the routing's integers are 4 bytes too). The byte counts below are sums
// of theory/moe_buffers.hpp's table, the buffers train/moe/ allocates; the tables here say
// what they come to. N tokens per routing group (a micro-batch's rows on one rank), C hidden,
// E experts, k routed per token, Fe an expert's width, S shared experts. An expert is a SwiGLU
// MLP (Llama's: gate and up matrices, then down) or a GELU MLP (GPT's: up, GELU, down; no
// biases, as Megatron-core's grouped experts): the tables below count a SwiGLU's three wide
// buffers (gate, up, product), of which a GELU expert keeps two (pre-activation, GELU output)
// and needs two gradients. Dropless routing can send all N·k assignments to the experts, so
// the expert-side buffers are sized for N·k rows whatever the capacity factor.
//
//   kept per MoE layer and micro-batch (what backward needs)
//     router scores                      N·E
//     chosen experts, combine weights,
//       expert-major row of each          3·N·k
//     expert offsets, chosen per expert  2·E + 1
//     dispatch buffer (tokens' rows,
//       expert-major)                    N·k·C
//     expert gate, up, silu(gate)·up     3·N·k·Fe
//     combine buffer (experts' outputs)  N·k·C
//     shared experts' gate, up, product  3·N·S·Fe
//   shared scratch (one set for every MoE layer)
//     logits, their gradient             2·N·E
//     weight gradients                   N·k
//     expert-output and dispatch grads   2·N·k·C
//     SwiGLU gradients (3 of them)       3·max(N·k·Fe, N·S·Fe)
//
// The dispatch and combine buffers are the rows the all-to-alls of expert parallelism carry
// (the dispatch sends the dispatch buffer's rows to their experts' ranks, the combine brings
// the combine buffer's back).
//
// Expert parallelism over ep > 1 ranks (each holding E/ep experts) runs the experts on the rows
// the rank receives, which dropless routing bounds only by R = ep·N·k (every peer's every
// assignment to this rank's experts). Then the experts' gate, up and product have R rows
// (3·R·Fe kept, in place of 3·N·k·Fe), and each rank adds
//     kept:    received rows R·C, the experts' outputs before the combine R·C, the rows
//              received per (source, local expert) E
//     scratch: their gradients 2·R·C, and the SwiGLU gradients 3·max(R·Fe, N·S·Fe)
//
// The experts' own tensor parallelism over etp > 1 ranks (--etp, the tp group; Megatron-core's
// expert tensor parallelism) splits each routed expert's width: every Fe above that belongs to a
// routed expert becomes Fe/etp (the shared experts stay whole), and the scratch adds the N·C
// rows in which a rank sums its experts' partial outputs (forward) and their partial input
// gradients (backward) before the all-reduce over etp.
#pragma once

#include <cstddef>
#include <vector>

#include "theory/precision.hpp"

namespace parbench {

// The experts' MLP form (a config's "expert_activation").
enum class ExpertActivation { swiglu, gelu };

struct MoeMemoryShape {
    std::size_t tokens = 0;          // N
    std::size_t hidden = 0;          // C
    std::size_t experts = 0;         // E
    std::size_t top_k = 0;           // k
    std::size_t expert_hidden = 0;   // Fe
    std::size_t shared_experts = 0;  // S
    std::size_t ep = 1;              // expert-parallel ranks
    ExpertActivation activation = ExpertActivation::swiglu;
    std::size_t etp = 1;             // ranks splitting each routed expert's width (--etp)
    // A routed expert's width on this rank: Fe/etp.
    std::size_t routed_hidden() const { return expert_hidden / etp; }
    // Wide (rows x Fe) buffers an expert keeps per row, and gradients its backward needs: 3 for
    // SwiGLU (gate, up, product), 2 for GELU (pre-activation, output); as many as its matrices.
    std::size_t wide_buffers() const { return activation == ExpertActivation::swiglu ? 3 : 2; }
    // Rows the experts of this rank run on at most: N·k, or ep·N·k under expert parallelism.
    std::size_t expert_rows() const { return ep > 1 ? ep * tokens * top_k : tokens * top_k; }
};

// Bytes of the dispatch and combine buffers of one MoE layer and micro-batch: 2·N·k·C·4.
std::size_t moe_dispatch_buffer_bytes(const MoeMemoryShape& shape);
// Bytes one MoE layer keeps for backward per micro-batch (the kept table above; the dispatch
// and combine buffers included).
std::size_t moe_kept_bytes(const MoeMemoryShape& shape);
// Bytes of the scratch one model's MoE layers share.
std::size_t moe_scratch_bytes(const MoeMemoryShape& shape);
// Under sequence parallelism each tp rank routes its own rows, so an MoE layer's parameter
// gradients are partial sums over tp, summed through one pack per layer and micro-batch
// (train/moe/moe_model_state.hpp MoeGradientPack): its floats, the router E·C, the shared
// experts' and this rank's E/ep routed experts' matrices.
std::size_t moe_sequence_parallel_pack_floats(const MoeMemoryShape& shape);
// The experts' matmuls (train/moe/moe_layer.cpp expert_forward): up to expert_rows() rows
// through an expert's C -> Fe and Fe -> C matrices, and the shared experts' N rows through
// C -> S·Fe -> C. Under bf16 they size the operand copies with the dense matmuls
// (train/matmuls.hpp); the router's matmul stays fp32.
std::vector<MatmulShape> moe_expert_matmul_shapes(const MoeMemoryShape& shape);

}  // namespace parbench

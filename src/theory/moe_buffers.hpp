// The buffers the training engine's MoE layer (train/moe/moe_layer.hpp) allocates, with their
// sizes (llm.c's size table, as theory/gpt_buffers.hpp for a layer's own): what one MoE layer
// keeps per micro-batch for backward (the router's scores and decisions, the dispatch and
// combine buffers, the experts' activations, under expert parallelism the rows received), the
// scratch the model's MoE layers share, and under SP the pack their parameter gradients are
// summed over tp in. train/moe/ allocates exactly these; theory/moe_memory.hpp's byte counts
// (its table in prose, with the formulas' derivation) and theory/memory.cpp sum them. Sizes in
// elements of 4 bytes (fp32, and the routing's int32 alike); a buffer sized 0 is one the shape
// does not take. N tokens, C hidden, E experts, k routed per token, Re = expert_rows(), Fr =
// routed_hidden(), S·Fe the shared experts' width.
#pragma once

#include <cstddef>

#include "theory/moe_memory.hpp"

namespace parbench {

struct MoeKeptBuffers {
    std::size_t scores = 0;                     // (N,E) the router's
    std::size_t chosen = 0, weights = 0;        // (N,k) int32 experts, their combine weights
    std::size_t slot = 0;                       // (N,k) int32 each assignment's expert-major row
    std::size_t expert_start = 0;               // (E+1) int32 the experts' first rows
    std::size_t routed = 0;                     // (E) int32 the assignments chosen per expert
    std::size_t dispatched = 0;                 // (N·k,C) the kept assignments' input rows
    std::size_t gate = 0, up = 0, glu = 0;      // (Re,Fr); up for SwiGLU experts only
    std::size_t expert_out = 0;                 // (N·k,C) each kept assignment's expert output
    std::size_t shared_gate = 0, shared_up = 0, shared_glu = 0;  // (N,S·Fe); up for SwiGLU only
    std::size_t received = 0, received_out = 0;  // (Re,C) under expert parallelism
    std::size_t received_counts = 0;             // (E) int32 under expert parallelism
    std::size_t total() const;
};

struct MoeScratchBuffers {
    std::size_t logits = 0, dlogits = 0;              // (N,E)
    std::size_t dweights = 0;                         // (N,k)
    std::size_t dexpert_out = 0, ddispatched = 0;     // (N·k,C)
    std::size_t dreceived_out = 0, dreceived = 0;     // (Re,C) under expert parallelism
    std::size_t dglu = 0, dgate = 0, dup = 0;         // max(Re·Fr, N·S·Fe); dup for SwiGLU only
    std::size_t expert_tensor_sum = 0;                // (N,C) under --etp
    std::size_t total() const;
};

// Under SP, the MoE parameter gradients' pack (train/moe/moe_model_state.hpp MoeGradientPack),
// in MoeGradients' order: the router (E,C), this rank's E/ep routed experts' gate (up for
// SwiGLU only) and down matrices, the shared experts' likewise.
struct MoeGradientPackBuffers {
    std::size_t router = 0, experts_gate = 0, experts_up = 0, experts_down = 0;
    std::size_t shared_gate = 0, shared_up = 0, shared_down = 0;
    std::size_t total() const;
};

MoeKeptBuffers moe_kept_buffers(const MoeMemoryShape& shape);
MoeScratchBuffers moe_scratch_buffers(const MoeMemoryShape& shape);
MoeGradientPackBuffers moe_gradient_pack_buffers(const MoeMemoryShape& shape);

}  // namespace parbench

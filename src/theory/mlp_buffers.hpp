// The activation buffers the MLP allocates (llm.c's size table: one list of every buffer and
// its size): train/models/mlp.cpp allocates exactly these from its memory ledger, and the memory
// theory (theory/memory.cpp) sums them, so the theory's MLP activations are this list, not a
// replay of the model's constructor. Sizes are in floats.
#pragma once

#include <cstddef>
#include <vector>

#include "theory/model_config.hpp"
#include "theory/precision.hpp"
#include "theory/tensor_split.hpp"

namespace parbench {

// train/models/mlp.cpp fuses each layer's weight gradient with its AdamW update when its scheme
// updates in pieces (ParameterAccess::updates_in_pieces): rows of the gradient are computed into
// one buffer of this many rows (fewer in a narrower layer), small enough to stay in a core's
// caches beside the update's streams, and updated from there; 256, the band of rows CpuOps'
// skinny input gradient sums at a time, so that the fused input gradient has the unfused one's
// bits (train/ops/matmul.cpp asserts it). The MLP holds that buffer whenever the fusion can happen: whole layers (tp 1), fp32
// matmuls, one micro-batch.
inline constexpr int mlp_gradient_piece_rows = 256;
inline bool mlp_holds_gradient_piece(int tp, Precision precision, int microbatches) {
    return tp == 1 && precision == Precision::fp32 && microbatches == 1;
}

// What one layer keeps for backward. `post` 0: the layer's output is its pre-activation (the
// last layer), or (allgather style) the gathered copy of its GELU output is kept instead and the
// slice is scratch; `gathered` 0 outside the allgather style and on the last layer.
struct MlpLayerBuffers {
    std::size_t pre = 0;       // pre-activation, (B, the layer's output columns on this rank)
    std::size_t post = 0;      // GELU output, the next layer's input
    std::size_t gathered = 0;  // allgather style: the gathered GELU output, (t, B, H/t)
};

struct MlpBuffers {
    // One of each per micro-batch.
    std::size_t input = 0;   // (B, H)
    std::size_t target = 0;  // (B, the last layer's columns on this rank)
    std::size_t loss = 0;    // (B)
    std::vector<MlpLayerBuffers> layers;
    // Backward scratch shared by the layers.
    std::size_t dlosses = 0, dpre = 0, dpost = 0;
    std::size_t slice = 0, dgathered = 0;  // allgather style only
    int piece_rows = 0;                    // mlp_holds_gradient_piece: rows of a weight gradient
    std::size_t piece = 0;                 // piece_rows x H
    // Every linear layer is (B,H)·(H,H)ᵀ or a slice of it: the largest operands (train/matmuls.hpp).
    std::vector<MatmulShape> matmuls;

    std::size_t per_microbatch() const { return input + target + loss; }
    std::size_t layer_stores() const;  // every layer's pre + post + gathered
    std::size_t backward_scratch() const { return dlosses + dpre + dpost; }
    std::size_t allgather_scratch() const { return slice + dgathered; }
};

// The buffers of an MLP of `config` split by `split` (its tp and style), with `batch` samples
// per micro-batch and `microbatches` of them, its matmuls in `precision`.
MlpBuffers mlp_buffers(const ModelConfig& config, const TensorSplit& split, int batch, int microbatches,
                       Precision precision);

}  // namespace parbench

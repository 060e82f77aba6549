// How tensor parallelism splits a model's tensors (Shoeybi et al., Megatron-LM, arXiv 1909.08053
// sec. 3): the style, a rank's place in the split, and which pieces of each full tensor it holds.
// The collectives that run the split live in train/tensor_parallel.hpp.
#pragma once

#include <vector>

#include "theory/parameter_layout.hpp"

namespace parbench {

enum class TensorParallelStyle {
    megatron,   // column-parallel then row-parallel linear, one all-reduce per pair
    allgather,  // every linear column-parallel, its output slices all-gathered each layer
};

// This rank's place in its tensor-parallel group, and how the model is split.
struct TensorSplit {
    int rank = 0;
    int size = 1;
    bool sequence_parallel = false;
    TensorParallelStyle style = TensorParallelStyle::megatron;
};

// extent / t: one rank's equal slice. Throws std::logic_error when t does not divide it (the
// option checks guarantee it does).
int split_extent(int extent, const TensorSplit& split);

// ---- which pieces of a full tensor a rank holds (TensorPiece, parameter_layout.hpp) ---------
// A linear's weight is (out, in), y = x · wᵀ. Column-parallel: rows [r·out/t, (r+1)·out/t)
// (and the same slice of its bias). Row-parallel: columns [r·in/t, (r+1)·in/t).
std::vector<TensorPiece> column_parallel_rows(int out, int in, const TensorSplit& split);
std::vector<TensorPiece> row_parallel_columns(int out, int in, const TensorSplit& split);
// The fused QKV weight (3C, in) or bias (in = 1): this rank's heads of q, of k and of v, so
// its local (3C/t, in) rows are [q | k | v] of its heads, the layout attention expects.
std::vector<TensorPiece> head_parallel_qkv(int channels, int in, const TensorSplit& split);
// A column-parallel weight (out, in) whose input arrives as t all-gathered slices, rank-major
// ((t, B, in/t) rather than (B, in)): t pieces, the in/t columns that multiply slice q,
// q = 0..t-1, so the local (t·out/t, in/t) tensor is t (out/t, in/t) blocks.
std::vector<TensorPiece> column_parallel_rows_by_input_slice(int out, int in, const TensorSplit& split);

}  // namespace parbench

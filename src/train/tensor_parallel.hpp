// Tensor parallelism, the width cut (Shoeybi et al., Megatron-LM, arXiv 1909.08053 sec. 3):
// inside a transformer block the first linear of each sublayer is split by output features
// ("column-parallel"), the second by input features ("row-parallel"), so the nonlinearity
// between them (GELU, or attention over local heads) needs no communication and each
// sublayer costs one all-reduce forward and one backward: the conjugate operators
//
//     f: identity forward, all-reduce backward      (entering the split region)
//     g: all-reduce forward, identity backward      (leaving it; the partial sums add up)
//
// With sequence parallelism (Korthikanti et al., arXiv 2205.05198 sec. 4.2.2) the regions
// between the split ones (LayerNorm, dropout, residual) hold 1/t of the tokens, and the
// operators become
//
//     g:  all-gather forward, reduce-scatter backward   (entering)
//     ḡ:  reduce-scatter forward, all-gather backward   (leaving)
//
// which move the same bytes as the all-reduce they replace (a ring all-reduce is a
// reduce-scatter then an all-gather). Tokens are split as t contiguous chunks of the b·s
// rows of a micro-batch (row-major (B,T,C)): Megatron's [s,b,h] layout splits s, ours splits
// b·s; LayerNorm and residual act per token, so only which tokens a rank holds differs.
//
// Models see a TensorParallelGroup of size 1 when tensor parallelism is off: every operator
// is then the identity and no collective is issued.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "device/device.hpp"
#include "train/parameter_layout.hpp"

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

// The model's collectives over the tensor-parallel group.
class TensorParallelGroup {
  public:
    TensorParallelGroup() = default;  // size 1, no communicator: every operator is the identity
    TensorParallelGroup(Communicator& comm, const TensorSplit& split);

    const TensorSplit& split() const { return split_; }
    int rank() const { return split_.rank; }
    int size() const { return split_.size; }
    bool sequence_parallel() const { return split_.sequence_parallel; }
    // Terms that the unsplit model adds once (a row-parallel linear's bias, the position
    // embedding) are added by group rank 0 before the partial sums are reduced.
    bool adds_replicated_terms() const { return split_.rank == 0; }

    // Rows of the regions between the split ones: all `rows`, or 1/t of them under SP.
    int local_rows(int rows) const;

    // ---- the conjugate operators on a (rows, width) activation --------------------------
    // f / g forward, entering a split region: the full (rows, width) input. Without SP that is
    // `local` itself; with SP the token chunks are all-gathered into `full`.
    const float* enter(const float* local, float* full, int rows, int width);
    // g / ḡ forward, leaving a split region: sums the ranks' partial `partial_full` (rows,
    // width). Without SP: all-reduced in place, returned; with SP: reduce-scattered into
    // `local` (local_rows(rows), width), returned.
    const float* leave(float* partial_full, float* local, int rows, int width);
    // The backward of leave(): the full gradient. Without SP that is `dlocal` (already full and
    // the same on every rank); with SP the chunks are all-gathered into `dfull`.
    const float* leave_backward(const float* dlocal, float* dfull, int rows, int width);
    // The backward of enter(): the ranks' partial input gradients `dpartial_full` summed.
    // Without SP: all-reduced in place, returned; with SP: reduce-scattered into `dlocal`.
    const float* enter_backward(float* dpartial_full, float* dlocal, int rows, int width);

    // ---- plain collectives (no-ops on a group of one) ------------------------------------
    void allreduce_sum(float* data, std::size_t count);
    void allreduce_max(float* data, std::size_t count);
    // recv: count · size() floats, rank q's block at q · count.
    void allgather(const float* send, float* recv, std::size_t count);
    // send: count · size() floats; recv: this rank's summed block of count.
    void reduce_scatter(const float* send, float* recv, std::size_t count);

  private:
    Communicator* comm_ = nullptr;
    TensorSplit split_;
};

// The full model's parameters in canonical order (FlatLayout::canonical of the unsplit
// model) from every tensor-parallel rank's own canonical parameters (host vectors, staged
// through `device` memory for the group's backend): collective over the group.
// `local_layouts[q]` is group rank q's layout. Returns the empty vector on ranks other than
// group rank 0. Throws when the replicas of a tensor that every rank holds whole differ:
// they must stay bitwise identical (see gpt.cpp for why they do).
std::vector<float> assemble_full_parameters(Communicator& group, Device& device,
                                            const std::vector<float>& local, const ParameterLayout& full_layout,
                                            const std::vector<ParameterLayout>& local_layouts);
// The same on one process: `shards[q]` holds rank q's canonical parameters.
std::vector<float> merge_tensor_parallel_shards(const ParameterLayout& full_layout,
                                                const std::vector<ParameterLayout>& local_layouts,
                                                const std::vector<std::vector<float>>& shards);

}  // namespace parbench

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
#include "theory/parameter_layout.hpp"
#include "theory/tensor_split.hpp"

namespace parbench {


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
// they must stay bitwise identical (see gpt.cpp for why they do). The same puts the routed
// experts of an expert-parallel group together: `full_layout` is then the rank's tp-split
// layout with every expert, whose pieces the shards' elements are found in.
std::vector<float> assemble_full_parameters(Communicator& group, Device& device,
                                            const std::vector<float>& local, const ParameterLayout& full_layout,
                                            const std::vector<ParameterLayout>& local_layouts);
// The same on one process: `shards[q]` holds rank q's canonical parameters.
std::vector<float> merge_tensor_parallel_shards(const ParameterLayout& full_layout,
                                                const std::vector<ParameterLayout>& local_layouts,
                                                const std::vector<std::vector<float>>& shards);

}  // namespace parbench

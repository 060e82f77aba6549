// One collective as data for the harness: how its buffers are shaped for a size, how many
// bytes its bus carries per byte of payload, how to run it, and what every rank must
// receive. The harness never switches on the collective; it iterates the registry.
//
// Sizes follow nccl-tests: `count` is the element count of the collective's full buffer
// (the total of allgather's output, reducescatter's input, alltoall's buffer, the root's
// buffer of gather and scatter; the whole buffer otherwise), and count_multiple() is what
// that count must be a multiple of so the per-rank slices are whole. alltoallv's count is
// alltoall's, each rank's send buffer, cut into blocks of uneven size by --skew.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "collectives/skew.hpp"
#include "comm/communicator.hpp"
#include "core/dtype.hpp"
#include "kernels/validation_data.hpp"
#include "theory/bus_factor.hpp"

namespace parbench {

// A constructor rather than an aggregate: callers give the leading fields they need, and
// the skew, which only alltoallv reads, defaults without a missing-initializer warning.
struct CollectiveParams {
    CollectiveParams(DType type_ = DType::float32, ReduceOp op_ = ReduceOp::sum, int root_ = 0, Skew skew_ = {},
                     ExchangeDirection direction_ = ExchangeDirection::dispatch)
        : type(type_), op(op_), root(root_), skew(skew_), direction(direction_) {}
    DType type;
    ReduceOp op;
    int root;
    Skew skew;                    // alltoallv's per-destination blocks
    ExchangeDirection direction;  // alltoallv's: its blocks out (dispatch) or back (combine)
};

// A run of `count` elements of a rank's result, from element `offset` on, laid out as `layout`
// says (its element k the run's k-th).
struct ExpectedSegment {
    std::size_t offset = 0;
    std::size_t count = 0;
    ExpectedLayout layout;
};

// Elements each rank sends and receives in total, indexed by rank.
struct RankTraffic {
    std::vector<std::size_t> sent;
    std::vector<std::size_t> received;
};

// Element counts of one rank's buffers. In place, one buffer of inplace_count elements
// holds both: the send data at inplace_send_offset, the result at inplace_recv_offset.
struct BufferShape {
    std::size_t send_count = 0;
    std::size_t recv_count = 0;
    std::size_t inplace_count = 0;
    std::size_t inplace_send_offset = 0;
    std::size_t inplace_recv_offset = 0;
};

class Collective {
  public:
    virtual ~Collective() = default;
    virtual std::string_view name() const = 0;
    virtual bool reducing() const { return false; }
    virtual bool rooted() const { return false; }
    virtual bool supports_inplace() const { return true; }
    // Why there is no in-place form, for the report, when supports_inplace() is false.
    virtual std::string_view no_inplace_reason() const { return ""; }
    // Whether --skew shapes it (its per-destination blocks differ).
    virtual bool skewed() const { return false; }
    // Whether out of place the root's output buffer is part of the op on this backend.
    // MPI_Bcast has one buffer: the root sends from it, so an out-of-place MPI broadcast
    // sends from the root's input and writes no root output, rather than timing a copy
    // MPI never makes. NCCL's broadcast is truly out of place (it writes the root's output).
    virtual bool root_output_written(const Communicator& comm) const {
        (void)comm;
        return true;
    }
    virtual std::size_t count_multiple(int nranks) const = 0;
    // busbw = algbw x bus_factor (nccl-tests' doc/PERFORMANCE.md), from the one table of them.
    double bus_factor(int nranks) const { return collective_bus_factor(name(), nranks); }
    virtual BufferShape shape(std::size_t count, int nranks, int rank, const CollectiveParams& params) const = 0;
    virtual void run(Communicator& comm, const void* send, void* recv, std::size_t count,
                     const CollectiveParams& params) const = 0;
    // Whether the communicator has a non-blocking form of it (MPI_Iallreduce, MPI_Iallgather,
    // MPI_Ireduce_scatter_block; out of place for the reduce-scatter), which --nonblocking
    // times as IMB-NBC's *_pure benchmarks do: the call, then its wait.
    virtual bool has_nonblocking() const { return false; }
    // Whether that form takes the in-place placement (the MPI backend's reduce-scatter does not).
    virtual bool nonblocking_inplace() const { return has_nonblocking(); }
    // Issues that form on run()'s arguments; std::logic_error for a collective without one.
    virtual Request start(Communicator& comm, const void* send, void* recv, std::size_t count,
                          const CollectiveParams& params) const;
    // What the receive buffer must hold on this rank; nothing when this rank receives no
    // defined data (the non-root ranks of reduce and gather).
    virtual std::optional<ExpectedLayout> expected(std::size_t count, int nranks, int rank,
                                                   const CollectiveParams& params, const InputPattern& pattern) const = 0;
    // The result of `result_count` elements as runs of one layout each: expected()'s layout over
    // the whole result, or nothing. A collective whose blocks from different ranks differ in
    // size (alltoallv's combine) gives a run per block.
    virtual std::vector<ExpectedSegment> expected_segments(std::size_t count, int nranks, int rank,
                                                           const CollectiveParams& params, const InputPattern& pattern,
                                                           std::size_t result_count) const {
        if (auto layout = expected(count, nranks, rank, params, pattern))
            return {ExpectedSegment{0, result_count, *layout}};
        return {};
    }
    // For a collective whose ranks move different amounts (alltoallv under skew), what each
    // sends and receives; nothing when every rank moves the same.
    virtual std::optional<RankTraffic> rank_traffic(std::size_t count, int nranks,
                                                    const CollectiveParams& params) const {
        (void)count, (void)nranks, (void)params;
        return std::nullopt;
    }
};

// Output block q holds block data from rank q's input, starting at `index_offset` of it:
// the layout of allgather, gather (at the root) and alltoall.
ExpectedLayout blocks_from_every_rank(const InputPattern& pattern, std::size_t block, std::size_t index_offset);

// Every collective, in the order `all` runs them.
std::span<const Collective* const> all_collectives();
const Collective* find_collective(std::string_view name);

}  // namespace parbench

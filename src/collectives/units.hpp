// The collective units, one per file in this folder; registry.cpp lists them.
#pragma once

#include "collectives/collective.hpp"

namespace parbench {

// Declares a unit whose methods live in its own .cpp file. A declaration only: the ten
// classes differ in their definitions, not their shape.
#define PARBENCH_COLLECTIVE_UNIT(Class, unit_name, is_reducing, is_rooted, in_place, ...)                 \
    class Class final : public Collective {                                                                \
        __VA_ARGS__                                                                                        \
      public:                                                                                              \
        std::string_view name() const override { return unit_name; }                                      \
        bool reducing() const override { return is_reducing; }                                            \
        bool rooted() const override { return is_rooted; }                                                \
        bool supports_inplace() const override { return in_place; }                                       \
        std::size_t count_multiple(int nranks) const override;                                            \
        BufferShape shape(std::size_t count, int nranks, int rank,                                         \
                          const CollectiveParams& params) const override;                                  \
        void run(Communicator& comm, const void* send, void* recv, std::size_t count,                      \
                 const CollectiveParams& params) const override;                                           \
        std::optional<ExpectedLayout> expected(std::size_t count, int nranks, int rank,                    \
                                               const CollectiveParams& params,                             \
                                               const InputPattern& pattern) const override;                \
    }

// The members a unit with a non-blocking form adds (Collective::start), defined in its file.
#define PARBENCH_NONBLOCKING_FORM                                                                        \
  public:                                                                                                \
    bool has_nonblocking() const override { return true; }                                               \
    Request start(Communicator& comm, const void* send, void* recv, std::size_t count,                   \
                  const CollectiveParams& params) const override;

PARBENCH_COLLECTIVE_UNIT(Allreduce, "allreduce", true, false, true, PARBENCH_NONBLOCKING_FORM);
PARBENCH_COLLECTIVE_UNIT(Allgather, "allgather", false, false, true, PARBENCH_NONBLOCKING_FORM);
PARBENCH_COLLECTIVE_UNIT(ReduceScatter, "reducescatter", true, false, true, PARBENCH_NONBLOCKING_FORM
                         bool nonblocking_inplace() const override { return false; });
PARBENCH_COLLECTIVE_UNIT(Broadcast, "broadcast", false, true, true,
                         public: bool root_output_written(const Communicator& comm) const override;);
PARBENCH_COLLECTIVE_UNIT(Reduce, "reduce", true, true, true);
PARBENCH_COLLECTIVE_UNIT(Alltoall, "alltoall", false, false, true);
// MPI_IN_PLACE alltoallv needs a symmetric count matrix (what rank a sends b equals what b
// sends a); skewed blocks are not, so there is no in-place form.
PARBENCH_COLLECTIVE_UNIT(
    Alltoallv, "alltoallv", false, false, false, public: bool skewed() const override { return true; }
    std::string_view no_inplace_reason() const override {
        return "MPI_IN_PLACE alltoallv needs what rank a sends b to equal what b sends a; skewed blocks differ";
    }
    std::optional<RankTraffic> rank_traffic(std::size_t count, int nranks, const CollectiveParams& params)
        const override;
    std::vector<ExpectedSegment> expected_segments(std::size_t count, int nranks, int rank,
                                                   const CollectiveParams& params, const InputPattern& pattern,
                                                   std::size_t result_count) const override;);
PARBENCH_COLLECTIVE_UNIT(Gather, "gather", false, true, true);
PARBENCH_COLLECTIVE_UNIT(Scatter, "scatter", false, true, true);
PARBENCH_COLLECTIVE_UNIT(
    SendRecv, "sendrecv", false, false, false, public: std::string_view no_inplace_reason() const override {
        return "sending and receiving one buffer at once would race";
    });

#undef PARBENCH_COLLECTIVE_UNIT

}  // namespace parbench

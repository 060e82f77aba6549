#include "collectives/units.hpp"

namespace parbench {

std::size_t ReduceScatter::count_multiple(int nranks) const { return static_cast<std::size_t>(nranks); }

BufferShape ReduceScatter::shape(std::size_t count, int nranks, int rank, const CollectiveParams&) const {
    const std::size_t block = count / static_cast<std::size_t>(nranks);
    return {count, block, count, 0, block * static_cast<std::size_t>(rank)};
}

void ReduceScatter::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                        const CollectiveParams& params) const {
    comm.reduce_scatter(send, recv, count / static_cast<std::size_t>(comm.size()), params.type, params.op);
}

Request ReduceScatter::start(Communicator& comm, const void* send, void* recv, std::size_t count,
                        const CollectiveParams& params) const {
    return comm.ireduce_scatter(send, recv, count / static_cast<std::size_t>(comm.size()), params.type, params.op);
}

std::optional<ExpectedLayout> ReduceScatter::expected(std::size_t count, int nranks, int rank, const CollectiveParams&,
                                                      const InputPattern& pattern) const {
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.reduced = true;
    layout.index_offset = count / static_cast<std::size_t>(nranks) * static_cast<std::size_t>(rank);
    return layout;
}

}  // namespace parbench

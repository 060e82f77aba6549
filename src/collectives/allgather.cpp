#include "collectives/units.hpp"

namespace parbench {

std::size_t Allgather::count_multiple(int nranks) const { return static_cast<std::size_t>(nranks); }

BufferShape Allgather::shape(std::size_t count, int nranks, int rank, const CollectiveParams&) const {
    const std::size_t block = count / static_cast<std::size_t>(nranks);
    return {block, count, count, block * static_cast<std::size_t>(rank), 0};
}

void Allgather::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                    const CollectiveParams& params) const {
    comm.allgather(send, recv, count / static_cast<std::size_t>(comm.size()), params.type);
}

Request Allgather::start(Communicator& comm, const void* send, void* recv, std::size_t count,
                        const CollectiveParams& params) const {
    return comm.iallgather(send, recv, count / static_cast<std::size_t>(comm.size()), params.type);
}

std::optional<ExpectedLayout> Allgather::expected(std::size_t count, int nranks, int, const CollectiveParams&,
                                                  const InputPattern& pattern) const {
    return blocks_from_every_rank(pattern, count / static_cast<std::size_t>(nranks), 0);
}

}  // namespace parbench

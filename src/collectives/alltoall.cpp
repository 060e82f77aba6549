#include "collectives/units.hpp"

namespace parbench {

std::size_t Alltoall::count_multiple(int nranks) const { return static_cast<std::size_t>(nranks); }

BufferShape Alltoall::shape(std::size_t count, int, int, const CollectiveParams&) const {
    return {count, count, count, 0, 0};
}

void Alltoall::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                   const CollectiveParams& params) const {
    comm.alltoall(send, recv, count / static_cast<std::size_t>(comm.size()), params.type);
}

// Block q of the output is block `rank` of rank q's input.
std::optional<ExpectedLayout> Alltoall::expected(std::size_t count, int nranks, int rank, const CollectiveParams&,
                                                 const InputPattern& pattern) const {
    const std::size_t block = count / static_cast<std::size_t>(nranks);
    return blocks_from_every_rank(pattern, block, block * static_cast<std::size_t>(rank));
}

}  // namespace parbench

#include "collectives/units.hpp"

namespace parbench {

std::size_t Gather::count_multiple(int nranks) const { return static_cast<std::size_t>(nranks); }

BufferShape Gather::shape(std::size_t count, int nranks, int rank, const CollectiveParams& params) const {
    const std::size_t block = count / static_cast<std::size_t>(nranks);
    if (rank != params.root) return {block, 0, block, 0, 0};
    return {block, count, count, block * static_cast<std::size_t>(rank), 0};
}

void Gather::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                 const CollectiveParams& params) const {
    comm.gather(send, recv, count / static_cast<std::size_t>(comm.size()), params.type, params.root);
}

std::optional<ExpectedLayout> Gather::expected(std::size_t count, int nranks, int rank, const CollectiveParams& params,
                                               const InputPattern& pattern) const {
    if (rank != params.root) return std::nullopt;
    return blocks_from_every_rank(pattern, count / static_cast<std::size_t>(nranks), 0);
}

}  // namespace parbench

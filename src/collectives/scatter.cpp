#include "collectives/units.hpp"

namespace parbench {

std::size_t Scatter::count_multiple(int nranks) const { return static_cast<std::size_t>(nranks); }

BufferShape Scatter::shape(std::size_t count, int nranks, int rank, const CollectiveParams& params) const {
    const std::size_t block = count / static_cast<std::size_t>(nranks);
    if (rank != params.root) return {0, block, block, 0, 0};
    return {count, block, count, 0, block * static_cast<std::size_t>(rank)};
}

void Scatter::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                  const CollectiveParams& params) const {
    comm.scatter(send, recv, count / static_cast<std::size_t>(comm.size()), params.type, params.root);
}

std::optional<ExpectedLayout> Scatter::expected(std::size_t count, int nranks, int rank, const CollectiveParams& params,
                                                const InputPattern& pattern) const {
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.fixed_source_rank = params.root;
    layout.index_offset = count / static_cast<std::size_t>(nranks) * static_cast<std::size_t>(rank);
    return layout;
}

}  // namespace parbench

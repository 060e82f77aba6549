#include "collectives/units.hpp"

namespace parbench {

std::size_t Reduce::count_multiple(int) const { return 1; }

BufferShape Reduce::shape(std::size_t count, int, int, const CollectiveParams&) const {
    return {count, count, count, 0, 0};
}

void Reduce::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                 const CollectiveParams& params) const {
    comm.reduce(send, recv, count, params.type, params.op, params.root);
}

std::optional<ExpectedLayout> Reduce::expected(std::size_t, int, int rank, const CollectiveParams& params,
                                               const InputPattern& pattern) const {
    if (rank != params.root) return std::nullopt;
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.reduced = true;
    return layout;
}

}  // namespace parbench

#include "collectives/units.hpp"

namespace parbench {

std::size_t Allreduce::count_multiple(int) const { return 1; }

BufferShape Allreduce::shape(std::size_t count, int, int, const CollectiveParams&) const {
    return {count, count, count, 0, 0};
}

void Allreduce::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                    const CollectiveParams& params) const {
    comm.allreduce(send, recv, count, params.type, params.op);
}

Request Allreduce::start(Communicator& comm, const void* send, void* recv, std::size_t count,
                        const CollectiveParams& params) const {
    return comm.iallreduce(send, recv, count, params.type, params.op);
}

std::optional<ExpectedLayout> Allreduce::expected(std::size_t, int, int, const CollectiveParams&,
                                                  const InputPattern& pattern) const {
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.reduced = true;
    return layout;
}

}  // namespace parbench

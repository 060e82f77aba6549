#include "collectives/units.hpp"

namespace parbench {

std::size_t SendRecv::count_multiple(int) const { return 1; }

BufferShape SendRecv::shape(std::size_t count, int, int, const CollectiveParams&) const {
    return {count, count, count, 0, 0};
}

// A ring: send to rank+1, receive from rank-1, all at once.
void SendRecv::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                   const CollectiveParams& params) const {
    const int next = (comm.rank() + 1) % comm.size();
    const int previous = (comm.rank() + comm.size() - 1) % comm.size();
    comm.sendrecv(send, next, recv, previous, count, params.type);
}

std::optional<ExpectedLayout> SendRecv::expected(std::size_t, int nranks, int rank, const CollectiveParams&,
                                                 const InputPattern& pattern) const {
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.fixed_source_rank = (rank + nranks - 1) % nranks;
    return layout;
}

}  // namespace parbench

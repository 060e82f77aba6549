#include "collectives/units.hpp"

namespace parbench {

std::size_t Broadcast::count_multiple(int) const { return 1; }

BufferShape Broadcast::shape(std::size_t count, int, int, const CollectiveParams&) const {
    return {count, count, count, 0, 0};
}

bool Broadcast::root_output_written(const Communicator& comm) const { return comm.backend() != "mpi"; }

void Broadcast::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                    const CollectiveParams& params) const {
    // On MPI the root broadcasts its input buffer itself (one buffer, as MPI_Bcast has; the
    // root only reads it), so no send-to-receive copy is timed.
    if (comm.rank() == params.root && !root_output_written(comm)) recv = const_cast<void*>(send);
    comm.broadcast(send, recv, count, params.type, params.root);
}

std::optional<ExpectedLayout> Broadcast::expected(std::size_t, int, int, const CollectiveParams& params,
                                                  const InputPattern& pattern) const {
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.fixed_source_rank = params.root;
    return layout;
}

}  // namespace parbench

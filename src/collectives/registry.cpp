// The one table of collectives. Listing them here, rather than self-registering from each
// file, keeps a unit from silently vanishing when its object file is not linked.
#include <array>
#include <stdexcept>
#include <string>

#include "collectives/units.hpp"

namespace parbench {
namespace {

const Allreduce allreduce;
const Allgather allgather;
const ReduceScatter reducescatter;
const Broadcast broadcast;
const Reduce reduce;
const Alltoall alltoall;
const Alltoallv alltoallv;
const Gather gather;
const Scatter scatter;
const SendRecv sendrecv;

const std::array<const Collective*, 10> table{&allreduce, &allgather, &reducescatter, &broadcast, &reduce,
                                               &alltoall,  &alltoallv, &gather,        &scatter,   &sendrecv};

}  // namespace

ExpectedLayout blocks_from_every_rank(const InputPattern& pattern, std::size_t block, std::size_t index_offset) {
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.source_rank_from_block = true;
    layout.block = block;
    layout.index_offset = index_offset;
    layout.index_within_block = true;
    return layout;
}

Request Collective::start(Communicator&, const void*, void*, std::size_t, const CollectiveParams&) const {
    throw std::logic_error(std::string(name()) + " has no non-blocking form (check has_nonblocking first)");
}

std::span<const Collective* const> all_collectives() { return table; }

const Collective* find_collective(std::string_view name) {
    for (const Collective* collective : table)
        if (collective->name() == name) return collective;
    return nullptr;
}

}  // namespace parbench

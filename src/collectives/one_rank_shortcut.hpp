// What NCCL runs in place of a collective on a communicator of one rank: for allreduce,
// allgather, reducescatter, broadcast and reduce it launches no collective kernel but copies
// the send buffer into the receive buffer, and does nothing at all in place (NVIDIA/nccl
// src/enqueue.cc hands nRanks == 1 to ncclLaunchOneRank; only avg on floating types, a
// PreMulSum, launches a kernel, to scale). Such a point times a device copy, or an empty
// call, and its busbw is no link's bandwidth: the report says so beside the figures. Send/recv
// to oneself (sendrecv, alltoall and the rest built on it) does run NCCL's kernels.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "collectives/collective.hpp"

namespace parbench {

// The label of such a point ("one rank on NCCL: ..."), or nullopt where the figures measure
// the collective. `backend` is the data communicator's ("mpi", "nccl"), `ranks` its size.
std::optional<std::string> one_rank_shortcut(const Collective& collective, std::string_view backend, int ranks,
                                             const CollectiveParams& params);

// The bus factor a point's busbw is reported with: 0 for such a copy, since no link carried
// anything (nccl-tests keeps broadcast's and reduce's factor of 1 there and so prints the copy's
// speed as a bus bandwidth); the collective's own factor otherwise.
double point_bus_factor(const Collective& collective, int ranks, bool one_rank_copy);

}  // namespace parbench

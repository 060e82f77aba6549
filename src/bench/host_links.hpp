// Measures what bounds a shared-memory transport on this host (plan/expected_collective.hpp's
// HostLinks): every rank of `comm` runs each loop at the same time, as the ranks of a
// collective do, so the figures are per rank while the others load the same memory.
//   step latency: a ring exchange of 8 bytes (send to the next rank, receive from the previous
//                 one), the time of one step of a ring or tree algorithm, the mean of 200 after
//                 20 untimed, the slowest rank's
//   call latency: the same exchange timed as the harness times a call (barrier, start, exchange,
//                 stop; the slowest rank's time), the median of 50
//   exchange:     the ring exchange with half the working set as the message, bytes received per
//                 second: the transport's own bandwidth
//   copy:         memcpy of half the working set into the other half: the bound of any
//                 shared-memory transport, recorded beside the exchange's
//   reduce:       y += x over float32, x and y each half the working set
// at working sets of 64 KiB, 1 MiB, 16 MiB and 64 MiB that are not above `max_working_set`
// (and at it, when it lies between them), the best of three passes of about 64 MiB each per rank,
// then the slowest rank's: the bandwidth the collective's slowest rank has.
#pragma once

#include <cstdint>

#include "comm/communicator.hpp"
#include "device/device.hpp"
#include "plan/expected_collective.hpp"

namespace parbench {

// Collective over `comm` (an MPI communicator on host memory); the same result on every rank.
HostLinks measure_host_links(Communicator& comm, Device& device, std::uint64_t max_working_set);

}  // namespace parbench

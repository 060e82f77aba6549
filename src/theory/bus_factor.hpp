// nccl-tests' bus factor (doc/PERFORMANCE.md): busbw = algbw x bus_factor, what each rank's
// link carries relative to the payload. The one copy: the collectives' reports
// (collectives/collective.hpp), the planner's fits and predictions (plan/alpha_beta.hpp) and the
// background all-reduce's work count (bench/background_load.cpp) all read it.
#pragma once

#include <string_view>

namespace parbench {

// For a group of `nranks`; 1 for a name it does not list (point-to-point traffic).
//   allreduce                          2(n-1)/n: a reduce-scatter, then an all-gather
//   allgather, reducescatter, alltoall, (n-1)/n: each rank (or gather's and scatter's root)
//   alltoallv, gather, scatter                  moves the part of the buffer the others hold;
//                                      under alltoallv's skew the busiest rank sets the time,
//                                      so the same bytes over a longer time show as a lower
//                                      busbw, the cost of the imbalance
//   broadcast, reduce, sendrecv        1: the whole buffer crosses a link once (each way)
double collective_bus_factor(std::string_view collective, int nranks);

}  // namespace parbench

// The --timeout watchdog of a multi-rank command: sets up its side channel (collective over
// `control`, at start-up), and on a hang prints the watchdog's one line, lets the caller keep
// what it measured (e.g. rewrite the report as partial), and ends this process with status 124
// (mpirun then ends the others). No MPI call is made after start-up.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "bench/watchdog.hpp"
#include "comm/communicator.hpp"
#include "comm/mpi_session.hpp"

namespace parbench {

// timeout_s <= 0: no timeout (and, without progress lines, enter() is a no-op). `on_hang` runs
// on the watchdog thread with the message, before the process ends; it must not block on the
// main thread. `progress`: the long-point lines (bench/watchdog.hpp), for the ranks that print.
std::unique_ptr<Watchdog> start_watchdog(double timeout_s, const MpiSession& session, Communicator& control,
                                         std::function<void(const std::string& message)> on_hang,
                                         ProgressLines progress = {});

}  // namespace parbench

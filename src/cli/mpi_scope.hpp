// Runs a command body with MPI started, and ends it the same way on every rank: a usage
// error is printed once (first rank) before any rank exits, since mpirun kills the job
// as soon as one process exits non-zero; any other failure aborts the whole job, since the
// other ranks may already wait in a collective.
//
// Before the body runs, every rank takes part in two agreements (cli/rank_agreement.hpp):
// whether any rank failed before MPI started (see join_failed_start), and whether all ranks
// resolved the same options. Both end every rank with exit status 2 and one line.
//
// In a launch of several ranks every rank joins the first agreement, whatever it runs: a rank
// whose command needs no MPI (plan, compare, train --print-schedule), that only prints --help
// or its --version, or whose flags failed, starts MPI to do so (run_beside_peers,
// join_failed_start), since ranks waiting in MPI_Init for a process that never calls it wait
// for ever (Open MPI's mpirun ends a job early only when a process exits non-zero or dies).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

#include "cli/command.hpp"
#include "comm/communicator.hpp"
#include "comm/mpi_session.hpp"

namespace parbench {

using MpiBody = std::function<int(const MpiSession& session, Communicator& control)>;

// `control` is an MPI duplicate of the world on host memory, for bookkeeping. `options` is
// what every rank must agree on (the command's resolved config and its input files' digests).
// MPI starts at `threads` (SINGLE unless the command's user asks for more).
int run_with_mpi(Invocation& invocation, const nlohmann::json& options, const MpiBody& body,
                 MpiThreadLevel threads = MpiThreadLevel::single);

// A rank whose flags failed to parse or validate (or that failed otherwise before starting
// MPI), in a job of several ranks, starts MPI only to tell the others (which wait in
// run_with_mpi's or run_beside_peers' first agreement), so that the lowest failing rank's
// message is printed once, naming its rank and host. Returns `exit_code`. Should the other
// ranks never start MPI (another program), a fallback prints the message after 30 s and exits.
int join_failed_start(int& argc, char**& argv, const std::string& message, int exit_code = 2);

// What a rank that needs no MPI runs (`body`: plan, compare, train --print-schedule, --help,
// --version, --dry-run). Alone (no launcher, or a launch of one rank) it just runs it. In a
// launch of several ranks it first joins the others' first agreements, so that a rank running
// anything else is refused there, on every rank, in one line naming what each rank runs
//   ranks run different commands: rank 0 train, rank 1 plan; launch every rank with the same command and flags
// and, when every rank runs the same, only the first rank runs `body` (its output printed
// once), after MPI has ended; the others return 0. A fallback ends the wait after 30 s should a
// peer never start MPI (another program).
int run_beside_peers(int& argc, char**& argv, const std::function<int()>& body);

// Whether this process has started MPI (even if it has ended it since): its agreements are
// behind it, and MPI cannot start again.
bool mpi_was_started();

// Ends every process of the job now with `exit_code`.
[[noreturn]] void abort_job(Communicator& comm, int exit_code);

}  // namespace parbench

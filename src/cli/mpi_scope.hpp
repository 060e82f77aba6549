// Runs a command body with MPI started, and ends it the same way on every rank: a usage
// error is printed once (first rank) before any rank exits, since mpirun kills the job
// as soon as one process exits non-zero; any other failure aborts the whole job, since the
// other ranks may already wait in a collective.
//
// Before the body runs, every rank takes part in two agreements (cli/rank_agreement.hpp):
// whether any rank failed before MPI started (see join_failed_start), and whether all ranks
// resolved the same options. Both end every rank with exit status 2 and one line.
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

// A rank whose flags failed to parse or validate, in a job of several ranks, starts MPI only
// to tell the others (which wait in run_with_mpi's first agreement), so that the lowest
// failing rank's message is printed once, naming its rank and host. Returns 2. Should the
// other ranks never start MPI (they ran a command that needs none), a fallback prints the
// message after 30 s and exits.
int join_failed_start(int& argc, char**& argv, const std::string& message);

// Ends every process of the job now with `exit_code`.
[[noreturn]] void abort_job(Communicator& comm, int exit_code);

}  // namespace parbench

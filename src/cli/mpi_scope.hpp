// Runs a command body with MPI started, and ends it the same way on every rank: a usage
// error is printed once (first rank) before any rank exits, since mpirun kills the job
// as soon as one process exits non-zero; any other failure aborts the whole job, since the
// other ranks may already wait in a collective.
#pragma once

#include <functional>

#include "cli/command.hpp"
#include "comm/communicator.hpp"
#include "comm/mpi_session.hpp"

namespace parbench {

using MpiBody = std::function<int(const MpiSession& session, Communicator& control)>;

// `control` is an MPI duplicate of the world on host memory, for bookkeeping. MPI starts
// at `threads` (SINGLE unless the command's user asks for more).
int run_with_mpi(Invocation& invocation, const MpiBody& body, MpiThreadLevel threads = MpiThreadLevel::single);

// Ends every process of the job now with `exit_code`.
[[noreturn]] void abort_job(Communicator& comm, int exit_code);

}  // namespace parbench

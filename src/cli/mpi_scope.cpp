#include "cli/mpi_scope.hpp"

#include <cstdlib>
#include <iostream>

#include "comm/mpi_communicator.hpp"
#include "core/error.hpp"

namespace parbench {

void abort_job(Communicator& comm, int exit_code) {
    comm.abort(exit_code);
    std::_Exit(exit_code);
}

int run_with_mpi(Invocation& invocation, const MpiBody& body, MpiThreadLevel threads) {
    MpiSession session(invocation.argc, invocation.argv, threads);
    auto control = MpiCommunicator::world();
    try {
        return body(session, *control);
    } catch (const UsageError& error) {
        // Raised alike on every rank (agreed through throw_if_any_rank_failed where needed).
        if (session.world_rank() == 0) std::cerr << (std::string("error: ") + error.what() + "\n") << std::flush;
        control->barrier();
        return 2;
    } catch (const std::exception& error) {
        std::cerr << ("error: rank " + std::to_string(session.world_rank()) + ": " + error.what() + "\n")
                  << std::flush;
        abort_job(*control, 1);
    }
}

}  // namespace parbench

// Gathers the report's Environment over the job: hosts from the MPI session, every rank's
// device name over the control communicator, the launcher from its environment variables.
#pragma once

#include "comm/communicator.hpp"
#include "comm/mpi_session.hpp"
#include "device/device.hpp"
#include "report/environment.hpp"

namespace parbench {

// Collective over `control`.
Environment collect_environment(const MpiSession& session, const Device& device, const Communicator& data,
                                Communicator& control);

}  // namespace parbench

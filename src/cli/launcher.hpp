// What the launcher (mpirun, srun, mpiexec) tells a process before MPI starts: used to print
// usage errors once, from the first rank, without initialising MPI, to know whether other
// ranks exist that must hear about an error only this one saw, and to record in reports
// which launcher started the job (rank, host and world size always come from MPI itself).
#pragma once

#include <string>

namespace parbench {

// The rank the launcher assigned, from OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or
// SLURM_PROCID; 0 when started without a launcher.
int launcher_rank();
inline bool is_first_rank() { return launcher_rank() == 0; }

// "mpirun (Open MPI)", "srun (Slurm)", "mpiexec (MPICH Hydra)", or "none (singleton)", told
// apart by the variables each sets in its processes' environment.
std::string launcher_name();

// The job's size from OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS; 1 without a launcher.
int launcher_world_size();

// This machine's host name (gethostname), for messages that name where an error happened.
std::string host_name();

}  // namespace parbench

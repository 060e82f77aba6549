// What the launcher (mpirun, srun, mpiexec) tells a process before MPI starts: used to print
// usage errors once, from the first rank, without initialising MPI, and to record in reports
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

}  // namespace parbench

// What the launcher (mpirun, srun) tells a process before MPI starts: used to print usage
// errors once, from the first rank, without initialising MPI.
#pragma once

namespace parbench {

// The rank the launcher assigned, from OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or
// SLURM_PROCID; 0 when started without a launcher.
int launcher_rank();
inline bool is_first_rank() { return launcher_rank() == 0; }

}  // namespace parbench

#include "cli/launcher.hpp"

#include <cstdlib>
#include <string>

namespace parbench {

int launcher_rank() {
    for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
        if (const char* value = std::getenv(variable)) {
            try {
                return std::stoi(value);
            } catch (const std::exception&) {
                continue;
            }
        }
    }
    return 0;
}

std::string launcher_name() {
    const auto set = [](const char* variable) { return std::getenv(variable) != nullptr; };
    // Open MPI's daemons hand their children the address of mpirun (the HNP); mpirun inside a
    // Slurm allocation starts those daemons with srun, so this test comes first.
    if (set("OMPI_MCA_orte_hnp_uri")) return "mpirun (Open MPI)";
    // Hydra's proxies keep a control channel to mpiexec open in every process.
    if (set("HYDI_CONTROL_FD")) return "mpiexec (MPICH Hydra)";
    // srun's step daemons name the step in every task they start.
    if (set("SLURM_STEP_ID") && set("SLURM_PROCID")) return "srun (Slurm)";
    if (set("PMIX_RANK") || set("PMI_RANK")) return "a PMI launcher";
    return "none (singleton)";
}

}  // namespace parbench

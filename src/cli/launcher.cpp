#include "cli/launcher.hpp"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <initializer_list>
#include <string>

namespace parbench {
namespace {

int first_integer(std::initializer_list<const char*> variables, int fallback) {
    for (const char* variable : variables) {
        if (const char* value = std::getenv(variable)) {
            try {
                return std::stoi(value);
            } catch (const std::exception&) {
                continue;
            }
        }
    }
    return fallback;
}

}  // namespace

int launcher_rank() { return first_integer({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}, 0); }

int launcher_world_size() { return first_integer({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, 1); }

std::string host_name() {
    char name[HOST_NAME_MAX + 1] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return "unknown host";
    return name;
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
    // A process started alone becomes an MPI singleton, and Open MPI's singleton start sets
    // the PMIx variables below in it too (with this mark): asked after MPI_Init, it was not
    // started by a PMI launcher.
    const char* ess = std::getenv("OMPI_MCA_ess");
    if (ess != nullptr && std::string(ess) == "singleton") return "none (singleton)";
    if (set("PMIX_RANK") || set("PMI_RANK")) return "a PMI launcher";
    return "none (singleton)";
}

}  // namespace parbench

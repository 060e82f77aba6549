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

}  // namespace parbench

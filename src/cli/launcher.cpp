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

}  // namespace parbench

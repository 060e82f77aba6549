#include "theory/bus_factor.hpp"

namespace parbench {

double collective_bus_factor(std::string_view collective, int nranks) {
    if (collective == "allreduce") return 2.0 * (nranks - 1) / nranks;
    if (collective == "allgather" || collective == "reducescatter" || collective == "alltoall" ||
        collective == "alltoallv" || collective == "gather" || collective == "scatter")
        return static_cast<double>(nranks - 1) / nranks;
    return 1.0;
}

}  // namespace parbench

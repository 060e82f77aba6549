#include "theory/zero_partition.hpp"

namespace parbench {

ModelStates zero_partitioned_states(const ModelStates& bytes_per_parameter, double parameters, int zero_stage,
                                    double ways) {
    ModelStates states;
    states.params = bytes_per_parameter.params * parameters / (zero_stage >= 3 ? ways : 1.0);
    states.grads = bytes_per_parameter.grads * parameters / (zero_stage >= 2 ? ways : 1.0);
    states.optimizer = bytes_per_parameter.optimizer * parameters / (zero_stage >= 1 ? ways : 1.0);
    return states;
}

}  // namespace parbench

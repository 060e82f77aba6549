#include "train/expected_traffic.hpp"

namespace parbench {

std::map<std::string, TrafficByOp> expected_rank_traffic(const TrainPlan& plan, const MeshShape& shape,
                                                         const MeshCoordinates& at) {
    return engine_rank_traffic(engine_layout(plan, shape), at.pp, at.tp);
}

TrafficByOp measured_traffic(const CommStats& stats, int steps) {
    TrafficByOp traffic;
    for (const auto& [op, counter] : stats.by_op)
        traffic[op] = CollectiveVolume{static_cast<double>(counter.calls) / steps,
                                       static_cast<double>(counter.bytes) / steps};
    return traffic;
}

}  // namespace parbench

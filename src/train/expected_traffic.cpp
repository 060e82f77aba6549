#include "train/expected_traffic.hpp"

namespace parbench {

std::map<std::string, TrafficByOp> expected_rank_traffic(const TrainPlan& plan, const MeshShape& shape,
                                                         const MeshCoordinates& at) {
    std::map<std::string, TrafficByOp> traffic = engine_rank_traffic(engine_layout(plan, shape), at.pp, at.tp, nullptr, at.cp);
    // Under context parallelism the gradient group is dp x cp ranks, one communicator that
    // train's report names "dp_cp" (train/mesh.hpp).
    if (shape.cp > 1) {
        const auto gradients = traffic.find("dp");
        if (gradients != traffic.end()) {
            traffic["dp_cp"] = gradients->second;
            traffic.erase(gradients);
        }
    }
    return traffic;
}

TrafficByOp measured_traffic(const CommStats& stats, int steps) {
    TrafficByOp traffic;
    for (const auto& [op, counter] : stats.by_op)
        traffic[op] = CollectiveVolume{static_cast<double>(counter.calls) / steps,
                                       static_cast<double>(counter.bytes) / steps};
    return traffic;
}

}  // namespace parbench

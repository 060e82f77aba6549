#include "train/expected_traffic.hpp"

namespace parbench {

std::map<std::string, TrafficByOp> expected_rank_traffic(const TrainPlan& plan, const MeshShape& shape,
                                                         const MeshCoordinates& at) {
    std::map<std::string, TrafficByOp> traffic = engine_rank_traffic(plan.layout, at.pp, at.tp, nullptr, at.cp);
    // The aux-loss-free balancing bias: one all-reduce per step over the gradient group of the
    // loads (E doubles) of every MoE layer this rank holds (train/models/transformer_model.hpp's
    // finish_step).
    if (plan.layout.model.moe && plan.layout.moe.bias_update_rate > 0.0 && shape.dp * shape.cp > 1) {
        int moe_layers = 0;
        for (int layer = 0; layer < plan.layout.model.layers; ++layer) {
            bool held = shape.pp == 1;
            for (int chunk = 0; chunk < plan.layout.virtual_stages && !held; ++chunk) {
                const LayerRange& range = plan.layout.stage_ranges.at(static_cast<std::size_t>(chunk * shape.pp + at.pp));
                held = layer >= range.first && layer < range.end;
            }
            moe_layers += held && plan.layout.model.moe->is_moe_layer(layer);
        }
        if (moe_layers > 0) {
            CollectiveVolume& loads = traffic["dp"]["allreduce"];
            loads.calls += 1.0;
            loads.bytes += static_cast<double>(moe_layers) * plan.layout.model.moe->experts * sizeof(double);
        }
    }
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

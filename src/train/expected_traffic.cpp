#include "train/expected_traffic.hpp"

#include "plan/context_parallel.hpp"

namespace parbench {

std::map<std::string, TrafficByOp> expected_rank_traffic(const TrainPlan& plan, const MeshShape& shape,
                                                         const MeshCoordinates& at, const PipelinePart& part,
                                                         const Model& model) {
    const TrainOptions& o = plan.options;
    const int microbatch_size = o.global_batch / shape.dp / o.microbatches;
    const TensorSplit split = plan.tensor_split(at.tp);
    ModelShare share = whole_model_share(plan.model);
    if (part.active()) {
        share = ModelShare{0, false, false};
        for (const LayerRange& chunk : part.chunks) {
            share.layers += chunk.end - chunk.first;
            share.first_stage = share.first_stage || chunk.first == 0;
            share.last_stage = share.last_stage || chunk.end == plan.model.layers;
        }
    }
    std::map<std::string, TrafficByOp> traffic;
    // Under context parallelism the gradients are averaged over dp x cp ranks (one group), and
    // every per-token figure counts this rank's seq / cp tokens.
    const int gradient_ranks = shape.dp * shape.cp;
    const std::string gradient_dimension = shape.cp > 1 ? "dp_cp" : "dp";
    const int local_seq = plan.local_seq_len();
    if (gradient_ranks > 1)
        traffic[gradient_dimension] =
            data_parallel_traffic(model.layout(), gradient_ranks, plan.scheme, model.parameter_use_order());
    if (shape.tp > 1)
        traffic["tp"] = tensor_parallel_traffic(plan.model, local_seq, microbatch_size, o.microbatches, split, share,
                                                plan.recompute);
    if (shape.cp > 1)
        traffic["cp"] = context_parallel_traffic(context_local_gqa_shape(plan.model, microbatch_size, local_seq, split),
                                                 plan.context_split(at.cp), share.layers, o.microbatches,
                                                 plan.recompute);
    if (shape.pp > 1) {
        std::vector<int> held;
        for (int chunk = 0; chunk < o.virtual_stages; ++chunk) held.push_back(chunk * shape.pp + at.pp);
        // The residual stream of one micro-batch: 1/t of its tokens under SP.
        const double rows = static_cast<double>(microbatch_size) * local_seq / (split.sequence_parallel ? split.size : 1);
        const double boundary_bytes = rows * plan.model.hidden * sizeof(float);
        // A tied embedding whose copies live on two stages (Model::shared_unit).
        const int shared = model.shared_unit();
        const double tied_bytes =
            shared >= 0 ? static_cast<double>(model.layout().units().at(static_cast<std::size_t>(shared)).numel) *
                              sizeof(float)
                        : 0.0;
        traffic["pp"] = pipeline_traffic(held, shape.pp * o.virtual_stages, o.microbatches, boundary_bytes, tied_bytes);
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

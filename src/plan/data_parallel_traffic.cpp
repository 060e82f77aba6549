#include "plan/data_parallel_traffic.hpp"

namespace parbench {
namespace {

void add(Traffic& traffic, const std::string& op, double calls, double bytes_each) {
    CollectiveVolume& volume = traffic[op];
    volume.calls += calls;
    volume.bytes += calls * bytes_each;
}

}  // namespace

Traffic data_parallel_traffic_per_step(const EngineLayout& l, const EngineRank& rank) {
    Traffic traffic;
    // The gradient group: dp x cp ranks under context parallelism (train/mesh.hpp).
    if (l.gradient_ranks() <= 1) return traffic;
    const ParameterLayout& layout = rank.layout;
    const bool zero3 = l.zero == 3;
    const FlatLayout flat(layout, zero3 ? one_unit_per_group(layout) : group_units_by_bytes(layout, l.bucket_bytes),
                          l.zero == 0 ? 1 : l.gradient_ranks());
    const double m = l.microbatches;
    for (const Segment& s : flat.segments()) {
        const double padded = static_cast<double>(s.padded_numel) * 4.0;
        if (l.zero == 0) {
            add(traffic, "allreduce", 1, static_cast<double>(s.numel) * 4.0);
        } else {
            add(traffic, "reducescatter", l.zero == 1 ? 1 : m, padded);
            if (!zero3) add(traffic, "allgather", 1, padded);
        }
    }
    if (zero3) {
        // Every use of a unit's parameters gathers it, except where the model keeps it held.
        // GPT's head is its embedding unit (tied), Llama's its own unit L + 1.
        const int L = l.model.layers;
        const bool transformer = l.model.kind != ModelKind::mlp;
        const int head = l.model.kind == ModelKind::llama ? L + 1 : 0;
        for (int use = 0; use < (transformer ? 2 * L + 2 : 2 * L - 1); ++use) {
            int unit = 0;
            if (transformer)
                unit = use == 0 ? 0 : use == L + 1 ? head : use <= L ? use : 2 * L + 2 - use;
            else
                unit = use < L ? use : 2 * L - 2 - use;
            add(traffic, "allgather", m, static_cast<double>(flat.segment_of_unit(unit).padded_numel) * 4.0);
        }
    }
    return traffic;
}

Traffic pipeline_traffic_per_step(const EngineLayout& l, int pp_rank, const EnginePipeline* pipeline) {
    Traffic traffic;
    if (l.pp <= 1) return traffic;
    std::optional<EnginePipeline> built;
    if (pipeline == nullptr) pipeline = &built.emplace(*engine_pipeline(l));
    const Schedule& schedule = pipeline->schedule;
    const double rows = static_cast<double>(l.microbatch_size) * l.local_seq_len() / (l.sp ? l.tp : 1);
    const double boundary_bytes = rows * l.model.hidden * 4.0;
    for (const Action& action : schedule.ranks.at(static_cast<std::size_t>(pp_rank)))
        if (action.is_send()) add(traffic, "send", 1, boundary_bytes);
    // Rank r holds virtual stages r, r + p, ...: the first stage on rank 0, the last on rank p - 1.
    if (l.model.kind == ModelKind::gpt && (pp_rank == 0 || pp_rank == l.pp - 1)) {
        const ParameterLayout whole = model_parameter_layout(l.model, l.seq_len, TensorSplit{0, l.tp, l.sp, l.tp_style});
        add(traffic, "sendrecv", 1, static_cast<double>(whole.units().at(0).numel) * 4.0);
    }
    return traffic;
}

}  // namespace parbench

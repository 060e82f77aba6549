#include "plan/layout_search.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"
#include "theory/pipeline/partition.hpp"

namespace parbench {
namespace {

std::vector<int> divisors(int n) {
    std::vector<int> out;
    for (int d = 1; d <= n; ++d)
        if (n % d == 0) out.push_back(d);
    return out;
}

// A schedule of pp x micro-batches x up to 8 virtual stages stays within what plan simulates
// (the one-layout command's limit on --pp x --microbatches x --virtual-stages).
constexpr long long max_schedule_slots = 1LL << 20;

// The list's counts, and (unless the user gave the list) those cutting a dp rank's `per_dp`
// sequences into micro-batches of 1, 2, 4 and 8.
std::vector<int> microbatch_counts(const SearchSpace& space, int per_dp, int pp) {
    std::vector<int> counts = space.microbatch_counts;
    if (space.extend_microbatch_counts)
        for (const int size : {1, 2, 4, 8})
            if (per_dp % size == 0 && static_cast<long long>(per_dp / size) * pp * 8 <= max_schedule_slots)
                counts.push_back(per_dp / size);
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    return counts;
}

}  // namespace

SearchResult search_layouts(const SearchSpace& space, const PlanContext& context) {
    SearchResult result;
    const ModelConfig& model = space.base.engine.model;
    const int gpus = context.cluster.gpus;
    const int batch = space.base.engine.global_batch;
    auto drop = [&](const std::string& reason) { ++result.dropped[reason]; };
    for (int tp : divisors(gpus)) {
        if (tp > context.cluster.gpus_per_host && !space.allow_cross_host_tp) {
            drop("tp above --gpus-per-host");
            continue;
        }
        if (tp > 1 && (model.heads % tp != 0 || model.hidden % tp != 0 || model.vocab % tp != 0)) {
            drop("tp does not divide heads, hidden or vocab");
            continue;
        }
        for (int pp : divisors(gpus / tp)) {
            if (pp > model.layers || (pp > 1 && model.kind == ModelKind::mlp)) {
                drop("more stages than layers");
                continue;
            }
            const int dp = gpus / tp / pp;
            if (batch % dp != 0) {
                drop(batch_not_split_reason);
                continue;
            }
            const std::vector<int> counts = microbatch_counts(space, batch / dp, pp);
            if (std::none_of(counts.begin(), counts.end(), [&](int m) { return (batch / dp) % m == 0; })) {
                drop(microbatch_list_reason);
                continue;
            }
            for (int m : counts) {
                if ((batch / dp) % m != 0) continue;  // other counts of the list cut it
                std::vector<std::pair<ScheduleKind, int>> schedules{{ScheduleKind::one_f_one_b, 1}};
                if (pp > 1) {
                    schedules.push_back({ScheduleKind::gpipe, 1});
                    schedules.push_back({ScheduleKind::zero_bubble_h1, 1});
                    // Interleaving with every chunk count that cuts each stage's layers evenly
                    // (Megatron-LM's interleaved schedule, arXiv 2104.04473 sec. 2.2.2), up to 8:
                    // more chunks shrink the bubble by v and add v times the transfers.
                    for (int v = 2; v <= 8; ++v)
                        if (model.layers % (v * pp) == 0) schedules.push_back({ScheduleKind::interleaved, v});
                }
                for (const auto& [schedule, v] : schedules) {
                    try {
                        if (pp > 1) validate_schedule_shape(schedule, ScheduleShape{pp, m, v});
                    } catch (const UsageError&) {
                        drop("schedule does not take this micro-batch count");
                        continue;
                    }
                    if (pp > 1 && schedule == ScheduleKind::zero_bubble_h1 && space.engine_only &&
                        space.base.engine.recompute == Recompute::full) {
                        drop("zb-h1 with full recompute, which train does not run");
                        continue;
                    }
                    // One schedule (and its peaks in flight) for every layout of this shape.
                    std::optional<EnginePipeline> pipeline;
                    if (pp > 1) {
                        Layout shape = space.base.engine;
                        shape.pp = pp;
                        shape.microbatches = m;
                        shape.schedule = schedule;
                        shape.virtual_stages = v;
                        pipeline = engine_pipeline(shape);
                    }
                    for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
                        if (sp && model.seq_len % tp != 0) continue;
                        if (sp && pp > 1 && schedule == ScheduleKind::zero_bubble_h1 && space.engine_only) continue;
                        for (int zero = 0; zero <= 3; ++zero) {
                            if (zero > 0 && dp == 1) continue;  // nothing to partition
                            if (pp > 1 && zero > 1) {
                                drop("ZeRO-2/3 with a pipeline");
                                continue;
                            }
                            PlanLayout layout = space.base;
                            Layout& l = layout.engine;
                            l.dp = dp;
                            l.tp = tp;
                            l.pp = pp;
                            l.sp = sp == 1;
                            // The overlap pipelines sequence parallelism's collectives only.
                            l.tp_comm_overlap = space.base.engine.tp_comm_overlap && l.sp;
                            l.zero = zero;
                            l.microbatches = m;
                            l.microbatch_size = batch / dp / m;
                            l.schedule = schedule;
                            l.virtual_stages = v;
                            l.overlap = pp == 1 && dp > 1;
                            l.prefetch = zero == 3;
                            if (!l.overlap) l.prefetch = false;
                            l.stage_ranges = pp > 1 ? virtual_stage_layers(model.layers, pp, v, {}) : std::vector<LayerRange>{};
                            // ZeRO-3 as FSDP runs it too (frameworks' conventions): without
                            // resharding after forward, and sharded inside a host.
                            std::vector<PlanLayout> variants{layout};
                            if (zero == 3 && !space.engine_only) {
                                const int host_shard = std::max(1, context.cluster.gpus_per_host / tp);
                                const bool hybrid = host_shard > 1 && dp > host_shard && dp % host_shard == 0;
                                for (int form = 1; form < 4; ++form) {
                                    PlanLayout variant = layout;
                                    variant.reshard_after_forward = (form & 1) == 0;
                                    if (form & 2) {
                                        if (!hybrid) continue;
                                        variant.shard_group = host_shard;
                                    }
                                    variants.push_back(variant);
                                }
                            }
                            // An MoE 1F1B layout's paired variant follows it (with_a2a_overlap_1f1b):
                            // kept only where the pairing is predicted faster (the last stage runs
                            // unpaired, and often sets the step).
                            double unpaired_step_ms = 0;
                            for (const PlanLayout& candidate : with_a2a_overlap_1f1b(with_expert_degrees(variants))) {
                                ++result.considered;
                                // Memory first: most layouts of a large model do not fit, and
                                // pricing their step (a schedule simulated per layout) was most
                                // of a search's time.
                                PlanMemory memory = plan_memory(candidate, pipeline ? &*pipeline : nullptr);
                                if (memory.total > plan_memory_capacity(candidate, context.cluster)) {
                                    if (!candidate.engine.moe.a2a_overlap_1f1b)
                                        unpaired_step_ms = std::numeric_limits<double>::infinity();
                                    drop("does not fit in memory");
                                    if (!result.any_unfit || memory.total < result.smallest_unfit.memory.total) {
                                        result.smallest_unfit = PlanPrediction{};
                                        result.smallest_unfit.layout = candidate;
                                        result.smallest_unfit.memory = std::move(memory);
                                    }
                                    result.any_unfit = true;
                                    continue;
                                }
                                PlanPrediction prediction =
                                    predict_layout(candidate, context, pipeline ? &*pipeline : nullptr, &memory);
                                if (!candidate.engine.moe.a2a_overlap_1f1b) {
                                    unpaired_step_ms = prediction.step_ms;
                                } else if (prediction.step_ms >= unpaired_step_ms) {
                                    drop("--moe-a2a-overlap-1f1b no faster than blocking");
                                    continue;
                                }
                                if (!prediction.fits) {
                                    drop("does not fit in memory");
                                    if (!result.any_unfit || prediction.memory.total < result.smallest_unfit.memory.total)
                                        result.smallest_unfit = prediction;
                                    result.any_unfit = true;
                                    continue;
                                }
                                result.ranked.push_back(std::move(prediction));
                            }
                        }
                    }
                }
            }
        }
    }
    std::sort(result.ranked.begin(), result.ranked.end(),
              [](const PlanPrediction& a, const PlanPrediction& b) { return a.step_ms < b.step_ms; });
    return result;
}

}  // namespace parbench

namespace parbench {

std::string unformed_reason(const SearchResult& result, const SearchSpace& space, int gpus, bool batch_given) {
    if (!result.ranked.empty() || result.any_unfit) return "";
    const int batch = space.base.engine.global_batch;
    const std::string batch_text = "--global-batch " + std::to_string(batch) + (batch_given ? "" : " (the default)");
    if (result.dropped.count(batch_not_split_reason) && !result.dropped.count(microbatch_list_reason))
        return batch_text + ": no layout on " + std::to_string(gpus) + " GPUs has a data-parallel degree that divides "
               "it, so no layout forms; give a global batch that the dp degrees divide (a multiple of " +
               std::to_string(gpus) + " fits every one), not a memory limit";
    if (result.dropped.count(microbatch_list_reason))
        return "--microbatch-list: none of its counts divides a dp rank's share of " + batch_text +
               ", so no layout forms; add counts that cut it (or drop --microbatch-list: the search then adds the "
               "counts of micro-batches of 1, 2, 4 and 8), not a memory limit";
    std::string reasons;
    for (const auto& [reason, count] : result.dropped) reasons += (reasons.empty() ? "" : "; ") + std::to_string(count) + " " + reason;
    return "no layout forms on " + std::to_string(gpus) + " GPUs with " + batch_text + " (" + reasons +
           "): change the GPUs, the batch or --gpus-per-host, not a memory limit";
}

}  // namespace parbench

#include "plan/layout_search.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// Degrees and schedule a group of layouts share (each then varies sp, ZeRO and its forms).
struct SearchShape {
    int dp = 1, tp = 1, pp = 1, microbatches = 1;
    ScheduleKind schedule = ScheduleKind::one_f_one_b;
    int virtual_stages = 1;
};

// A pipelined layout dropped on its model states alone (plan_memory_floor above the GPU's room),
// its full memory not yet computed: that needs its shape's schedule, and only matters if the
// layout may be the smallest unfit (settle_smallest_unfit).
struct UnpricedUnfit {
    PlanLayout layout;
    SearchShape shape;
    double floor = 0;
    long long order = 0;  // its place among the layouts considered
};

// The search's stages, outermost first: the degrees (tp, then pp, giving dp), the micro-batch
// counts, the pipeline schedules, then every sequence-parallel and ZeRO choice of that shape,
// each priced or dropped with its reason. One search's tally, shared by the stages.
struct SearchRun {
    const SearchSpace& space;
    const PlanContext& context;
    SearchResult result;
    // The smallest unfit layout among those whose memory was computed: the first of the least
    // total, and its place (result.considered when it came).
    bool smallest_priced = false;
    long long smallest_order = 0;
    std::vector<UnpricedUnfit> unpriced;

    void drop(const std::string& reason) { ++result.dropped[reason]; }
    bool below_smallest_unfit(double total) const {
        return !smallest_priced || total < result.smallest_unfit.memory.total;
    }
    // `order`: the layout's place among those considered (result.considered when it comes in order).
    void keep_smallest_unfit(PlanPrediction unfit, long long order) {
        result.smallest_unfit = std::move(unfit);
        smallest_priced = true;
        smallest_order = order;
    }
};

// Why tp cannot be used at all, or empty.
std::string tp_drop_reason(const SearchRun& run, int tp) {
    const ModelConfig& model = run.space.base.engine.model;
    if (tp > run.context.cluster.gpus_per_host && !run.space.allow_cross_host_tp) return "tp above --gpus-per-host";
    if (tp > 1 && (model.heads % tp != 0 || model.hidden % tp != 0 || model.vocab % tp != 0))
        return "tp does not divide heads, hidden or vocab";
    return "";
}

// The schedules a pipeline of pp stages is tried with: 1F1B, GPipe, ZB-H1, and interleaving
// with every chunk count that cuts each stage's layers evenly (Megatron-LM's interleaved
// schedule, arXiv 2104.04473 sec. 2.2.2), up to 8: more chunks shrink the bubble by v and add v
// times the transfers. Without a pipeline, 1F1B stands for "no schedule".
std::vector<std::pair<ScheduleKind, int>> schedules_for(const ModelConfig& model, int pp) {
    std::vector<std::pair<ScheduleKind, int>> schedules{{ScheduleKind::one_f_one_b, 1}};
    if (pp > 1) {
        schedules.push_back({ScheduleKind::gpipe, 1});
        schedules.push_back({ScheduleKind::zero_bubble_h1, 1});
        for (int v = 2; v <= 8; ++v)
            if (model.layers % (v * pp) == 0) schedules.push_back({ScheduleKind::interleaved, v});
    }
    return schedules;
}

// Why this schedule cannot run the shape, or empty.
std::string schedule_drop_reason(const SearchRun& run, const SearchShape& shape) {
    if (shape.pp == 1) return "";
    try {
        validate_schedule_shape(shape.schedule, ScheduleShape{shape.pp, shape.microbatches, shape.virtual_stages});
    } catch (const UsageError&) {
        return "schedule does not take this micro-batch count";
    }
    if (shape.schedule == ScheduleKind::zero_bubble_h1 && run.space.engine_only &&
        run.space.base.engine.recompute == Recompute::full)
        return "zb-h1 with full recompute, which train does not run";
    return "";
}

// One schedule (and its peaks in flight) for every layout of this shape, built when a layout
// first needs it: at a short sequence a default batch cuts into tens of thousands of micro-batches,
// and building their schedules was most of a search's time when no layout of the shape could fit.
class ShapePipeline {
  public:
    ShapePipeline(const SearchSpace& space, const SearchShape& shape) : space_(space), shape_(shape) {}
    const EnginePipeline* get() {
        if (shape_.pp == 1) return nullptr;
        if (!built_) {
            Layout layout = space_.base.engine;
            layout.pp = shape_.pp;
            layout.microbatches = shape_.microbatches;
            layout.schedule = shape_.schedule;
            layout.virtual_stages = shape_.virtual_stages;
            built_ = engine_pipeline(layout);
        }
        return &*built_;
    }
    bool built() const { return built_.has_value(); }
    bool builds(const SearchShape& shape) const {
        return shape.pp == shape_.pp && shape.microbatches == shape_.microbatches &&
               shape.schedule == shape_.schedule && shape.virtual_stages == shape_.virtual_stages;
    }

  private:
    const SearchSpace& space_;
    SearchShape shape_;
    std::optional<EnginePipeline> built_;
};

// The base layout at this shape, with sequence parallelism on or off and this ZeRO stage.
PlanLayout layout_at(const SearchSpace& space, const SearchShape& shape, bool sp, int zero) {
    const ModelConfig& model = space.base.engine.model;
    PlanLayout layout = space.base;
    Layout& l = layout.engine;
    l.dp = shape.dp;
    l.tp = shape.tp;
    l.pp = shape.pp;
    l.sp = sp;
    // The overlap pipelines sequence parallelism's collectives only.
    l.tp_comm_overlap = space.base.engine.tp_comm_overlap && l.sp;
    l.zero = zero;
    l.microbatches = shape.microbatches;
    l.microbatch_size = space.base.engine.global_batch / shape.dp / shape.microbatches;
    l.schedule = shape.schedule;
    l.virtual_stages = shape.virtual_stages;
    l.overlap = shape.pp == 1 && shape.dp > 1;
    l.prefetch = zero == 3;
    if (!l.overlap) l.prefetch = false;
    l.stage_ranges = shape.pp > 1 ? virtual_stage_layers(model.layers, shape.pp, shape.virtual_stages, {})
                                  : std::vector<LayerRange>{};
    return layout;
}

// The layout, and under ZeRO-3 the forms FSDP runs it in too (frameworks' conventions): without
// resharding after forward, and sharded inside a host.
std::vector<PlanLayout> zero3_forms(const SearchRun& run, const PlanLayout& layout) {
    std::vector<PlanLayout> forms{layout};
    if (layout.engine.zero != 3 || run.space.engine_only) return forms;
    const int host_shard = std::max(1, run.context.cluster.gpus_per_host / layout.engine.tp);
    const int dp = layout.engine.dp;
    const bool hybrid = host_shard > 1 && dp > host_shard && dp % host_shard == 0;
    for (int form = 1; form < 4; ++form) {
        PlanLayout variant = layout;
        variant.reshard_after_forward = (form & 1) == 0;
        if (form & 2) {
            if (!hybrid) continue;
            variant.shard_group = host_shard;
        }
        forms.push_back(variant);
    }
    return forms;
}

// An unfit layout known by its memory alone.
PlanPrediction unfit_memory(const PlanLayout& layout, PlanMemory memory) {
    PlanPrediction unfit;
    unfit.layout = layout;
    unfit.memory = std::move(memory);
    return unfit;
}

// Prices each candidate that fits, keeping the smallest that does not. An MoE 1F1B layout's
// paired variant follows it (with_a2a_overlap_1f1b): kept only where the pairing is predicted
// faster (the last stage runs unpaired, and often sets the step).
void price_candidates(SearchRun& run, const std::vector<PlanLayout>& candidates, const SearchShape& shape,
                      ShapePipeline& shape_pipeline) {
    double unpaired_step_ms = 0;
    for (const PlanLayout& candidate : candidates) {
        ++run.result.considered;
        const double capacity = plan_memory_capacity(candidate, run.context.cluster);
        // Until the shape's schedule is built, a pipelined layout whose model states alone exceed
        // the GPU's room is dropped as its full memory (never less than its states) would drop it.
        if (candidate.engine.pp > 1 && !shape_pipeline.built()) {
            const double floor = plan_memory_floor(candidate);
            if (floor > capacity) {
                if (!candidate.engine.moe.a2a_overlap_1f1b) unpaired_step_ms = std::numeric_limits<double>::infinity();
                run.drop("does not fit in memory");
                run.unpriced.push_back(UnpricedUnfit{candidate, shape, floor, run.result.considered});
                run.result.any_unfit = true;
                continue;
            }
        }
        const EnginePipeline* pipeline = shape_pipeline.get();
        // Memory first: most layouts of a large model do not fit, and pricing their step (a
        // schedule simulated per layout) was most of a search's time.
        PlanMemory memory = plan_memory(candidate, pipeline);
        if (memory.total > capacity) {
            if (!candidate.engine.moe.a2a_overlap_1f1b) unpaired_step_ms = std::numeric_limits<double>::infinity();
            run.drop("does not fit in memory");
            if (run.below_smallest_unfit(memory.total))
                run.keep_smallest_unfit(unfit_memory(candidate, std::move(memory)), run.result.considered);
            run.result.any_unfit = true;
            continue;
        }
        PlanPrediction prediction = predict_layout(candidate, run.context, pipeline, &memory);
        if (!candidate.engine.moe.a2a_overlap_1f1b) {
            unpaired_step_ms = prediction.step_ms;
        } else if (prediction.step_ms >= unpaired_step_ms) {
            run.drop("--moe-a2a-overlap-1f1b no faster than blocking");
            continue;
        }
        if (!prediction.fits) {
            run.drop("does not fit in memory");
            if (run.below_smallest_unfit(prediction.memory.total)) run.keep_smallest_unfit(prediction, run.result.considered);
            run.result.any_unfit = true;
            continue;
        }
        run.result.ranked.push_back(std::move(prediction));
    }
}

// Every sequence-parallel and ZeRO choice of one shape and schedule.
void search_schedule(SearchRun& run, const SearchShape& shape) {
    if (const std::string reason = schedule_drop_reason(run, shape); !reason.empty()) {
        run.drop(reason);
        return;
    }
    ShapePipeline pipeline(run.space, shape);
    const ModelConfig& model = run.space.base.engine.model;
    for (int sp = 0; sp <= (shape.tp > 1 ? 1 : 0); ++sp) {
        if (sp && model.seq_len % shape.tp != 0) continue;
        if (sp && shape.pp > 1 && shape.schedule == ScheduleKind::zero_bubble_h1 && run.space.engine_only) continue;
        for (int zero = 0; zero <= 3; ++zero) {
            if (zero > 0 && shape.dp == 1) continue;  // nothing to partition
            if (shape.pp > 1 && zero > 1) {
                run.drop("ZeRO-2/3 with a pipeline");
                continue;
            }
            const PlanLayout layout = layout_at(run.space, shape, sp == 1, zero);
            price_candidates(run, with_a2a_overlap_1f1b(with_expert_degrees(zero3_forms(run, layout))), shape,
                             pipeline);
        }
    }
}

// Every micro-batch count and schedule of one tp x pp (dp the rest of the GPUs).
void search_degrees(SearchRun& run, int tp, int pp) {
    const ModelConfig& model = run.space.base.engine.model;
    if (pp > model.layers || (pp > 1 && model.kind == ModelKind::mlp)) {
        run.drop("more stages than layers");
        return;
    }
    const int batch = run.space.base.engine.global_batch;
    const int dp = run.context.cluster.gpus / tp / pp;
    if (batch % dp != 0) {
        run.drop(batch_not_split_reason);
        return;
    }
    const std::vector<int> counts = microbatch_counts(run.space, batch / dp, pp);
    if (std::none_of(counts.begin(), counts.end(), [&](int m) { return (batch / dp) % m == 0; })) {
        run.drop(microbatch_list_reason);
        return;
    }
    for (int m : counts) {
        if ((batch / dp) % m != 0) continue;  // other counts of the list cut it
        for (const auto& [schedule, v] : schedules_for(model, pp))
            search_schedule(run, SearchShape{dp, tp, pp, m, schedule, v});
    }
}

// The smallest unfit layout as a search in order would keep it (the first of the least memory),
// now that the layouts dropped on their states have to be counted in: only those whose floor is
// not above the smallest so far can be below it or equal it earlier, so their memory is computed,
// the lowest floors first, until the floors pass the smallest.
void settle_smallest_unfit(SearchRun& run) {
    std::stable_sort(run.unpriced.begin(), run.unpriced.end(),
                     [](const UnpricedUnfit& a, const UnpricedUnfit& b) { return a.floor < b.floor; });
    std::optional<ShapePipeline> pipeline;
    for (const UnpricedUnfit& unfit : run.unpriced) {
        if (run.smallest_priced && unfit.floor > run.result.smallest_unfit.memory.total) break;
        const SearchShape& shape = unfit.shape;
        if (!pipeline || !pipeline->builds(shape)) pipeline.emplace(run.space, shape);
        PlanMemory memory = plan_memory(unfit.layout, pipeline->get());
        const double smallest = run.result.smallest_unfit.memory.total;
        if (!run.smallest_priced || memory.total < smallest ||
            (memory.total == smallest && unfit.order < run.smallest_order))
            run.keep_smallest_unfit(unfit_memory(unfit.layout, std::move(memory)), unfit.order);
    }
    run.unpriced.clear();
}

}  // namespace

SearchResult search_layouts(const SearchSpace& space, const PlanContext& context) {
    SearchRun run{space, context, {}, false, 0, {}};
    const int gpus = context.cluster.gpus;
    for (int tp : divisors(gpus)) {
        if (const std::string reason = tp_drop_reason(run, tp); !reason.empty()) {
            run.drop(reason);
            continue;
        }
        for (int pp : divisors(gpus / tp)) search_degrees(run, tp, pp);
    }
    settle_smallest_unfit(run);
    std::sort(run.result.ranked.begin(), run.result.ranked.end(),
              [](const PlanPrediction& a, const PlanPrediction& b) { return a.step_ms < b.step_ms; });
    return std::move(run.result);
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

#include "train/train_options.hpp"

#include <cmath>
#include <string>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "theory/model_shape.hpp"

namespace parbench {
namespace {

std::string text(int value) { return std::to_string(value); }

// train's layout: run by parbench's engine, fp32 and a global batch of 8 unless told
// (theory/engine_defaults.hpp).
LayoutTarget train_target(std::optional<int> world_size, bool block_attention_tiles) {
    LayoutTarget target;
    target.engine = true;
    if (world_size) target.world = WorldSize{*world_size, "ranks", "mpirun -np"};
    target.block_attention_tiles = block_attention_tiles;
    target.default_precision = parse_precision(engine_default_precision);
    target.default_global_batch = engine_default_global_batch;
    return target;
}

// What --check's serial reference cannot compare: an MoE layer routes one group per
// micro-batch and rank (train/moe/router.hpp). Under --sp and --cp each rank routes its own
// slice of a micro-batch's tokens, while the reference routes whole micro-batches: the same
// tokens reach the same experts only while neither the capacity nor the balancing loss looks
// at the group.
void check_moe_reference(const TrainPlan& plan) {
    const Layout& l = plan.layout;
    const bool sliced = l.sp || l.cp > 1;
    if (plan.options.check && l.model.moe && sliced && (l.moe.capacity_factor || l.moe.aux_loss_coeff != 0.0))
        throw UsageError(std::string(l.sp ? "--sp" : "--cp") + " with --check and " +
                         (l.moe.capacity_factor ? "--moe-expert-capacity-factor" : "--moe-aux-loss-coeff") + " on MoE "
                         "model " + l.model.name + ": each rank routes its own token slice, the reference whole "
                         "micro-batches, so capacity and balancing loss count different groups; drop the flag for "
                         "--check (dropless, aux-loss-free runs compare exactly) or drop --check");
}

}  // namespace

TrainPlan resolve_train_options(const TrainOptions& options) {
    if (options.steps < 1) throw UsageError("--steps must be at least 1");
    if (options.warmup < 0) throw UsageError("--warmup must be 0 or more");
    if (!(options.lr > 0.0) || !std::isfinite(options.lr)) throw UsageError("--lr must be a positive number");
    if (!(options.testing_slow_ms > 0.0) || !std::isfinite(options.testing_slow_ms))
        throw UsageError("--testing-slow-ms must be a positive number of milliseconds");
    if (options.peak_tflops && !(*options.peak_tflops > 0.0))
        throw UsageError("--peak-tflops must be a positive number (TFLOP/s per rank)");

    const ModelConfig model = load_model_config(options.model);
    // Sized from the config before anything is built: a model past the parameter limit is
    // refused here, not after minutes of allocation.
    check_model_size(model, "--model " + options.model);
    int seq_len = model.seq_len;
    if (options.seq) {
        if (!model.has_sequence())
            throw UsageError("--seq: model " + model.name + " is an MLP, which has no sequence; drop --seq");
        check_int(*options.seq, "--seq", 1, model_limits::max_seq_len);
        seq_len = *options.seq;
    }
    // The flag's own refusals now, before MPI starts; the backend's (flash on a GPU) once it is known.
    TrainPlan plan{options, resolve_layout(options.layout, model, seq_len, train_target(std::nullopt, true))};
    check_moe_reference(plan);
    return plan;
}

TrainPlan resolve_train_plan(const TrainPlan& plan, int world_size, bool block_attention_tiles) {
    const TrainOptions& o = plan.options;
    TrainPlan resolved{o, resolve_layout(o.layout, plan.layout.model, plan.layout.seq_len,
                                         train_target(world_size, block_attention_tiles))};
    if (o.testing_slow_rank >= world_size)
        throw UsageError("--testing-slow-rank " + text(o.testing_slow_rank) + ": the job has ranks 0 to " +
                         text(world_size - 1) + "; name one of them");
    if (o.testing_misread_rank >= world_size)
        throw UsageError("--testing-misread-rank " + text(o.testing_misread_rank) + ": the job has ranks 0 to " +
                         text(world_size - 1) + "; name one of them");
    return resolved;
}

void check_backend_moe_overlap_1f1b(const TrainPlan& plan, bool gpu) {
    // Never run on a GPU: a pass's blocking NCCL call could be enqueued while its partner's
    // exchange is still in flight on the side stream of the same communicator; until that is
    // tested, refuse rather than risk a hang.
    if (plan.layout.moe.a2a_overlap_1f1b && gpu)
        throw UsageError("--moe-a2a-overlap-1f1b is not run on a GPU yet (its paired exchanges share a NCCL "
                         "communicator with the other pass's collectives, untested); drop it or use --moe-a2a-overlap");
}

nlohmann::json to_json(const TrainOptions& o) {
    auto optional = [](const auto& value) { return value ? nlohmann::json(*value) : nlohmann::json(nullptr); };
    const LayoutFlags& l = o.layout;
    return {
        {"model", o.model},
        {"global_batch", l.global_batch.value_or(engine_default_global_batch)},
        {"seq", optional(o.seq)},
        {"steps", o.steps},
        {"warmup", o.warmup},
        {"seed", o.seed},
        {"lr", o.lr},
        {"dp", optional(l.dp)},
        {"tp", l.tp},
        {"sp", l.sp},
        {"tp_style", l.tp_style},
        {"pp", l.pp},
        {"schedule", l.schedule},
        {"virtual_stages", l.virtual_stages},
        {"stage_layers", l.stage_layers},
        {"p2p", l.p2p},
        {"zero", l.zero},
        {"microbatches", l.microbatches},
        {"bucket_mb", optional(l.bucket_mb)},
        {"overlap", l.overlap},
        {"prefetch", l.prefetch},
        {"precision", l.precision.value_or(engine_default_precision)},
        {"recompute", l.recompute},
        {"attention", l.attention.value_or("auto")},
        {"cp", l.cp},
        {"cp_style", optional(l.cp_style)},
        {"cp_balance", optional(l.cp_balance)},
        {"ep", l.ep.value_or(1)},
        {"etp", l.etp.value_or(1)},
        {"moe_expert_capacity_factor", optional(l.moe_capacity_factor)},
        {"moe_aux_loss_coeff", l.moe_aux_loss_coeff},
        {"moe_router_bias_update_rate", l.moe_bias_update_rate},
        {"moe_a2a_overlap", l.moe_a2a_overlap},
        {"moe_a2a_overlap_1f1b", l.moe_a2a_overlap_1f1b},
        {"peak_tflops", optional(o.peak_tflops)},
        {"check", o.check},
        {"backend_requested", o.backend},
        {"testing_slow_rank", o.testing_slow_rank},
        {"testing_misread_rank", o.testing_misread_rank},
    };
}

}  // namespace parbench

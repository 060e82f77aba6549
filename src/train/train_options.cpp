#include "train/train_options.hpp"

#include <cmath>
#include <string>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "theory/engine_attention.hpp"
#include "theory/layout_check.hpp"
#include "theory/model_shape.hpp"
#include "theory/memory.hpp"
#include "theory/moe_a2a_overlap_1f1b.hpp"
#include "train/matmuls.hpp"
#include "train/model.hpp"

namespace parbench {
namespace {

std::string text(int value) { return std::to_string(value); }

// Context parallelism and the pipeline as theory/layout_check.hpp checks them for train and
// plan alike.
void resolve_context_parallel(TrainPlan& plan) {
    const TrainOptions& o = plan.options;
    const ContextChoice choice =
        check_context_parallel(plan.model, plan.seq_len, ContextRequest{o.cp, o.cp_style, o.cp_balance});
    plan.cp_style = choice.style;
    plan.cp_balance = choice.balance;
}

// The --moe-* flags, and what the MoE layers do not compose with yet. Each MoE layer routes one
// group per micro-batch and rank (train/moe/router.hpp), so a layout that splits a
// micro-batch's tokens over ranks (SP, CP) routes different groups than --check's reference.
void check_moe(TrainPlan& plan) {
    const TrainOptions& o = plan.options;
    const bool any =
        o.moe_capacity_factor || o.moe_aux_loss_coeff != 0.0 || o.moe_bias_update_rate != 0.0 || o.moe_a2a_overlap ||
                     o.moe_a2a_overlap_1f1b;
    if (!plan.model.moe) {
        if (any)
            throw UsageError("--moe-* flags: model " + plan.model.name + " has no mixture-of-experts layers (no \"moe\" "
                             "in its config); drop the flags or pick an MoE model such as llama-moe-tiny");
        return;
    }
    if (o.moe_capacity_factor && !(*o.moe_capacity_factor > 0.0 && std::isfinite(*o.moe_capacity_factor)))
        throw UsageError("--moe-expert-capacity-factor must be a positive number (e.g. 1.25), or left out for "
                         "dropless routing");
    if (!(o.moe_aux_loss_coeff >= 0.0 && std::isfinite(o.moe_aux_loss_coeff)))
        throw UsageError("--moe-aux-loss-coeff must be 0 (off) or a positive number (e.g. 0.01)");
    if (!(o.moe_bias_update_rate >= 0.0 && std::isfinite(o.moe_bias_update_rate)))
        throw UsageError("--moe-router-bias-update-rate must be 0 (off) or a positive number (e.g. 0.001)");
    // Under --sp and --cp each rank routes its own slice of a micro-batch's tokens (its routing
    // group), while --check's reference routes whole micro-batches: the same tokens reach the
    // same experts only while neither the capacity nor the balancing loss looks at the group.
    const bool sliced = o.sp || o.cp > 1;
    // The aux-loss-free bias sums the loads over the gradient group (dp x cp); under SP the tp
    // ranks' loads differ too, and their biases would drift apart.
    if (o.sp && o.moe_bias_update_rate != 0.0)
        throw UsageError("--sp with --moe-router-bias-update-rate on MoE model " + plan.model.name + ": the balancing "
                         "bias sums expert loads over dp x cp only, while under --sp each tp rank routes its own "
                         "tokens; drop one of the two");
    if (o.check && sliced && (o.moe_capacity_factor || o.moe_aux_loss_coeff != 0.0))
        throw UsageError(std::string(o.sp ? "--sp" : "--cp") + " with --check and " +
                         (o.moe_capacity_factor ? "--moe-expert-capacity-factor" : "--moe-aux-loss-coeff") + " on MoE "
                         "model " + plan.model.name + ": each rank routes its own token slice, the reference whole "
                         "micro-batches, so capacity and balancing loss count different groups; drop the flag for "
                         "--check (dropless, aux-loss-free runs compare exactly) or drop --check");
    if (o.moe_a2a_overlap && o.ep <= 1)
        throw UsageError("--moe-a2a-overlap needs --ep 2 or more: without expert parallelism there is no all-to-all "
                         "to overlap; add --ep N or drop the flag");
    if (o.moe_a2a_overlap_1f1b)  // the rule plan applies too (theory/moe_a2a_overlap_1f1b.hpp)
        check_moe_a2a_overlap_1f1b({o.ep, o.moe_a2a_overlap, o.pp, o.schedule, o.virtual_stages, o.microbatches, o.etp,
                                    o.recompute, o.cp});
    plan.moe = MoeSettings{o.moe_capacity_factor, o.moe_aux_loss_coeff, o.moe_bias_update_rate, o.moe_a2a_overlap};
}

void resolve_pipeline(TrainPlan& plan) {
    const TrainOptions& o = plan.options;
    plan.schedule = parse_schedule_kind(o.schedule);
    plan.p2p = parse_p2p_mode(o.p2p);
    PipelineRequest request;
    request.pp = o.pp;
    request.schedule = plan.schedule;
    request.p2p = plan.p2p;
    request.virtual_stages = o.virtual_stages;
    request.stage_layers = o.stage_layers;
    request.microbatches = o.microbatches;
    request.zero = o.zero;
    request.overlap = o.overlap;
    request.prefetch = o.prefetch;
    request.sp = o.sp;
    request.recompute = plan.recompute;
    plan.stage_ranges = check_pipeline(plan.model, request);
}

}  // namespace

TrainPlan resolve_train_options(const TrainOptions& options) {
    TrainPlan plan;
    plan.options = options;
    if (options.global_batch < 1) throw UsageError("--global-batch must be at least 1 (sequences per step)");
    if (options.steps < 1) throw UsageError("--steps must be at least 1");
    if (options.warmup < 0) throw UsageError("--warmup must be 0 or more");
    if (!(options.lr > 0.0) || !std::isfinite(options.lr)) throw UsageError("--lr must be a positive number");
    if (options.dp && *options.dp < 1) throw UsageError("--dp must be at least 1");
    if (options.tp_style != "megatron" && options.tp_style != "allgather")
        throw UsageError("--tp-style '" + options.tp_style + "': use megatron or allgather");
    plan.tp_style = options.tp_style == "allgather" ? TensorParallelStyle::allgather : TensorParallelStyle::megatron;
    check_degrees(options.tp, options.pp, options.cp, options.zero, options.microbatches, options.sp, options.prefetch,
                  plan.tp_style);
    if (options.bucket_mb && (!(*options.bucket_mb > 0.0) || !std::isfinite(*options.bucket_mb)))
        throw UsageError("--bucket-mb must be a positive number of MiB (e.g. 25)");
    parse_precision(options.precision);  // refuses anything but fp32 and bf16
    if (!(options.testing_slow_ms > 0.0) || !std::isfinite(options.testing_slow_ms))
        throw UsageError("--testing-slow-ms must be a positive number of milliseconds");
    if (options.peak_tflops && !(*options.peak_tflops > 0.0))
        throw UsageError("--peak-tflops must be a positive number (TFLOP/s per rank)");

    plan.model = load_model_config(options.model);
    // Sized from the config before anything is built: a model past the parameter limit is
    // refused here, not after minutes of allocation.
    check_model_size(plan.model, "--model " + options.model);
    if (plan.model.mla)
        throw UsageError("--model " + options.model + ": multi-head latent attention (\"mla\" in " +
                         plan.model.source + ") is counted by plan only; train does not run it: drop \"mla\" to "
                         "train the model with grouped-query attention");
    check_moe(plan);
    plan.seq_len = plan.model.seq_len;
    if (options.seq) {
        if (!plan.model.has_sequence())
            throw UsageError("--seq: model " + plan.model.name + " is an MLP, which has no sequence; drop --seq");
        check_int(*options.seq, "--seq", 1, model_limits::max_seq_len);
        plan.seq_len = *options.seq;
    }

    resolve_context_parallel(plan);
    check_tensor_split(plan.model, options.tp, options.sp, plan.tp_style, plan.local_seq_len(), options.cp);

    plan.recompute = parse_recompute(options.recompute);
    resolve_pipeline(plan);
    if (options.moe_a2a_overlap_1f1b) check_moe_a2a_overlap_1f1b_stages(plan.model, plan.stage_ranges);

    if (plan.recompute != Recompute::none && !plan.model.has_sequence())
        throw UsageError("--recompute " + options.recompute + ": model " + plan.model.name +
                         " is an MLP, which has no attention core or transformer layer to recompute; use "
                         "--recompute none or a gpt or llama model");

    if (options.attention != "auto" && !plan.model.has_sequence())
        throw UsageError("--attention " + options.attention + ": model " + plan.model.name +
                         " is an MLP, which has no attention; drop --attention or pick a gpt or llama model");
    // The flag's own refusals now, before MPI starts; the backend's (flash on a GPU) once it is known.
    plan.attention = engine_attention(options.attention, true, plan.seq_len, options.cp);

    plan.scheme.zero_stage = options.zero;
    if (options.bucket_mb) {
        plan.scheme.bucket_bytes = static_cast<std::size_t>(*options.bucket_mb * 1024.0 * 1024.0);
        if (plan.scheme.bucket_bytes < sizeof(float)) throw UsageError("--bucket-mb is smaller than one parameter");
        plan.bucket_source = "--bucket-mb";
    } else {
        const std::size_t parameters = model_parameter_layout(plan.model, plan.seq_len, plan.tensor_split(0)).total_numel();
        plan.scheme.bucket_bytes = default_bucket_bytes(options.zero, parameters);
        plan.bucket_source = default_bucket_rule(options.zero);
    }
    plan.scheme.overlap = options.overlap;
    plan.scheme.prefetch = options.prefetch;
    plan.scheme.microbatches = options.microbatches;
    plan.scheme.adamw.lr = static_cast<float>(options.lr);
    return plan;
}

TrainPlan with_backend_attention(TrainPlan plan, bool backend_tiles_block_attention) {
    plan.attention =
        engine_attention(plan.options.attention, backend_tiles_block_attention, plan.seq_len, plan.options.cp);
    return plan;
}

void check_backend_moe_overlap_1f1b(const TrainPlan& plan, bool gpu) {
    // Never run on a GPU: a pass's blocking NCCL call could be enqueued while its partner's
    // exchange is still in flight on the side stream of the same communicator; until that is
    // tested, refuse rather than risk a hang.
    if (plan.options.moe_a2a_overlap_1f1b && gpu)
        throw UsageError("--moe-a2a-overlap-1f1b is not run on a GPU yet (its paired exchanges share a NCCL "
                         "communicator with the other pass's collectives, untested); drop it or use --moe-a2a-overlap");
}

MeshShape resolve_layout(const TrainPlan& plan, int world_size) {
    const TrainOptions& o = plan.options;
    MeshShape shape;
    shape.tp = o.tp;
    shape.pp = o.pp;
    shape.cp = o.cp;
    shape.dp = check_world(o.dp, o.tp, o.pp, o.cp, WorldSize{world_size, "ranks", "mpirun -np"});
    if (o.testing_slow_rank >= world_size)
        throw UsageError("--testing-slow-rank " + text(o.testing_slow_rank) + ": the job has ranks 0 to " +
                         text(world_size - 1) + "; name one of them");
    if (o.testing_misread_rank >= world_size)
        throw UsageError("--testing-misread-rank " + text(o.testing_misread_rank) + ": the job has ranks 0 to " +
                         text(world_size - 1) + "; name one of them");
    check_global_batch(o.global_batch, shape.dp, o.microbatches);
    check_expert_parallel(plan.model, o.ep, shape.dp, shape.cp);
    check_expert_tensor_parallel(plan.model, o.etp, o.tp, o.sp);
    return shape;
}

nlohmann::json to_json(const TrainOptions& o) {
    auto optional = [](const auto& value) { return value ? nlohmann::json(*value) : nlohmann::json(nullptr); };
    return {
        {"model", o.model},
        {"global_batch", o.global_batch},
        {"seq", optional(o.seq)},
        {"steps", o.steps},
        {"warmup", o.warmup},
        {"seed", o.seed},
        {"lr", o.lr},
        {"dp", optional(o.dp)},
        {"tp", o.tp},
        {"sp", o.sp},
        {"tp_style", o.tp_style},
        {"pp", o.pp},
        {"schedule", o.schedule},
        {"virtual_stages", o.virtual_stages},
        {"stage_layers", o.stage_layers},
        {"p2p", o.p2p},
        {"zero", o.zero},
        {"microbatches", o.microbatches},
        {"bucket_mb", optional(o.bucket_mb)},
        {"overlap", o.overlap},
        {"prefetch", o.prefetch},
        {"precision", o.precision},
        {"recompute", o.recompute},
        {"attention", o.attention},
        {"cp", o.cp},
        {"cp_style", optional(o.cp_style)},
        {"cp_balance", optional(o.cp_balance)},
        {"ep", o.ep},
        {"etp", o.etp},
        {"moe_expert_capacity_factor", optional(o.moe_capacity_factor)},
        {"moe_aux_loss_coeff", o.moe_aux_loss_coeff},
        {"moe_router_bias_update_rate", o.moe_bias_update_rate},
        {"moe_a2a_overlap", o.moe_a2a_overlap},
        {"moe_a2a_overlap_1f1b", o.moe_a2a_overlap_1f1b},
        {"peak_tflops", optional(o.peak_tflops)},
        {"check", o.check},
        {"backend_requested", o.backend},
        {"testing_slow_rank", o.testing_slow_rank},
        {"testing_misread_rank", o.testing_misread_rank},
    };
}

EngineLayout engine_layout(const TrainPlan& plan, const MeshShape& mesh) {
    const TrainOptions& o = plan.options;
    EngineLayout l;
    l.model = plan.model;
    l.seq_len = plan.seq_len;
    l.microbatches = o.microbatches;
    l.microbatch_size = plan.microbatch_size(mesh.dp);
    l.dp = mesh.dp;
    l.cp = mesh.cp;
    l.ep = o.ep;
    l.etp = o.etp;
    l.moe_a2a_overlap = o.moe_a2a_overlap;
    l.cp_style = plan.cp_style;
    l.cp_balance = plan.cp_balance;
    l.tp = mesh.tp;
    l.pp = mesh.pp;
    l.sp = o.sp;
    l.tp_style = plan.tp_style;
    l.zero = plan.scheme.zero_stage;
    l.bucket_bytes = plan.scheme.bucket_bytes;
    l.overlap = plan.scheme.overlap;
    l.prefetch = plan.scheme.prefetch;
    l.schedule = plan.schedule;
    l.virtual_stages = o.virtual_stages;
    l.stage_ranges = plan.stage_ranges;
    l.p2p = plan.p2p;
    l.precision = parse_precision(o.precision);
    l.recompute = plan.recompute;
    l.attention = plan.attention;
    return l;
}

}  // namespace parbench

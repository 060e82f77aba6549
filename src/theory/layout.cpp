#include "theory/layout.hpp"

#include <cmath>
#include <string>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "theory/engine_attention.hpp"
#include "theory/memory.hpp"
#include "theory/moe_a2a_overlap_1f1b.hpp"
#include "theory/pipeline/partition.hpp"

namespace parbench {
namespace {

std::string text(int value) { return std::to_string(value); }

// The flags that depend on another alone: --sp and --tp-style allgather need a tensor-parallel
// group, --prefetch needs ZeRO-3.
void check_degrees(const Layout& l) {
    if (l.sp && l.tp < 2)
        throw UsageError("--sp splits the sequence across the tensor-parallel group; it needs --tp 2 or more");
    if (l.tp_style == TensorParallelStyle::allgather && l.tp < 2)
        throw UsageError("--tp-style allgather splits every layer across the tensor-parallel group; it needs --tp 2 "
                         "or more");
    if (l.prefetch && l.zero != 3)
        throw UsageError("--prefetch gathers the next layer's parameters, which only ZeRO-3 shards; add --zero 3 or "
                         "drop --prefetch");
}

TensorParallelStyle parse_tp_style(const std::string& name) {
    if (name == "megatron") return TensorParallelStyle::megatron;
    if (name == "allgather") return TensorParallelStyle::allgather;
    throw UsageError("--tp-style '" + name + "': use megatron or allgather");
}

// The flags as given, read into the layout: degrees, splits, pipeline, scheme and memory
// options, each name parsed (UsageError naming the flag).
Layout read_flags(const LayoutFlags& f, const ModelConfig& model, int seq_len, const LayoutTarget& target) {
    Layout l;
    l.model = model;
    l.seq_len = seq_len;
    l.dp = f.dp.value_or(1);
    l.tp = f.tp;
    l.pp = f.pp;
    l.cp = f.cp;
    l.ep = f.ep.value_or(1);
    l.etp = f.etp.value_or(target.engine || !model.moe ? 1 : f.tp);
    l.sp = f.sp;
    l.tp_style = parse_tp_style(f.tp_style);
    l.zero = f.zero;
    l.overlap = f.overlap;
    l.prefetch = f.prefetch;
    if (f.tp_comm_overlap) {
        if (target.engine)
            throw UsageError("--tp-comm-overlap is Megatron-core's and torchtitan's overlap of tensor-parallel "
                             "collectives with GEMMs; parbench's train runs them blocking: plan a framework's job "
                             "(plan --states megatron|zero), or drop it");
        if (!target.degrees_searched && (f.tp < 2 || !f.sp))
            throw UsageError("--tp-comm-overlap overlaps sequence parallelism's all-gathers and reduce-scatters "
                             "(Megatron-core requires --sequence-parallel for it); add --tp 2 or more and --sp");
        l.tp_comm_overlap = true;
    }
    l.microbatches = f.microbatches;
    l.virtual_stages = f.virtual_stages;
    check_degrees(l);
    l.precision = f.precision ? parse_precision(*f.precision) : target.default_precision;
    l.recompute = parse_recompute(f.recompute);
    l.schedule = parse_schedule_kind(f.schedule);
    l.p2p = parse_p2p_mode(f.p2p);
    l.moe = MoeSettings{f.moe_capacity_factor, f.moe_aux_loss_coeff, f.moe_bias_update_rate, f.moe_a2a_overlap,
                        f.moe_a2a_overlap_1f1b};
    return l;
}

// parbench's engine trains grouped-query attention; multi-head latent attention is counted by
// plan's frameworks' conventions only (theory/moe.hpp).
void check_engine_model(const ModelConfig& model) {
    if (model.mla)
        throw UsageError("--model " + model.name + ": multi-head latent attention (\"mla\" in " + model.source +
                         ") is counted by plan's --states megatron|zero only; parbench's engine (train, plan --states "
                         "parbench) does not run it: drop \"mla\" to train the model with grouped-query attention, or "
                         "plan a framework's job with --states megatron|zero");
}

// The mixture-of-experts flags: refused on a dense model; in range; and what the MoE layers do
// not compose with yet. Each MoE layer routes one group per micro-batch and rank
// (train/moe/router.hpp); the aux-loss-free bias sums the loads over the gradient group (dp x
// cp), while under SP each tp rank routes its own tokens, so the tp ranks' biases would drift.
void check_moe(const LayoutFlags& f, const Layout& l, const LayoutTarget& target) {
    if (!l.model.moe) {
        const char* given = f.ep                                ? "--ep"
                            : f.etp                             ? "--etp"
                            : f.moe_capacity_factor             ? "--moe-expert-capacity-factor"
                            : f.moe_aux_loss_coeff != 0.0       ? "--moe-aux-loss-coeff"
                            : f.moe_bias_update_rate != 0.0     ? "--moe-router-bias-update-rate"
                            : f.moe_a2a_overlap                 ? "--moe-a2a-overlap"
                            : f.moe_a2a_overlap_1f1b            ? "--moe-a2a-overlap-1f1b"
                                                                : nullptr;
        if (given) throw UsageError(dense_model_moe_flag_refusal(given, l.model));
        return;
    }
    const MoeSettings& moe = l.moe;
    if (moe.capacity_factor && !(*moe.capacity_factor > 0.0 && std::isfinite(*moe.capacity_factor)))
        throw UsageError("--moe-expert-capacity-factor must be a positive number (e.g. 1.25), or left out for "
                         "dropless routing");
    if (!(moe.aux_loss_coeff >= 0.0 && std::isfinite(moe.aux_loss_coeff)))
        throw UsageError("--moe-aux-loss-coeff must be 0 (off) or a positive number (e.g. 0.01)");
    if (!(moe.bias_update_rate >= 0.0 && std::isfinite(moe.bias_update_rate)))
        throw UsageError("--moe-router-bias-update-rate must be 0 (off) or a positive number (e.g. 0.001)");
    if (l.sp && moe.bias_update_rate != 0.0)
        throw UsageError("--sp with --moe-router-bias-update-rate on MoE model " + l.model.name + ": the balancing "
                         "bias sums expert loads over dp x cp only, while under --sp each tp rank routes its own "
                         "tokens; drop one of the two");
    if (target.degrees_searched) return;  // the search tries the degrees ep and the pairing need
    if (moe.a2a_overlap && l.ep <= 1)
        throw UsageError("--moe-a2a-overlap needs --ep 2 or more: without expert parallelism there is no all-to-all "
                         "to overlap; add --ep N or drop the flag");
    if (moe.a2a_overlap_1f1b) check_moe_a2a_overlap_1f1b(l);
}

ContextStyle parse_context_style(const std::string& name) {
    if (name == "ring") return ContextStyle::ring;
    if (name == "alltoall") return ContextStyle::alltoall;
    throw UsageError("--cp-style '" + name + "': use ring (K/V blocks passed around the group) or alltoall (sequence "
                     "to heads and back)");
}

ContextBalance parse_context_balance(const std::string& name) {
    if (name == "zigzag") return ContextBalance::zigzag;
    if (name == "none") return ContextBalance::none;
    throw UsageError("--cp-balance '" + name + "': use zigzag (two chunks per rank, one from each end) or none "
                     "(contiguous chunks)");
}

// Context parallelism splits every sequence over the cp group: c contiguous chunks (balance
// none), or 2c chunks of which each rank holds one from each end (zigzag). The style and balance
// flags apply with cp > 1 only. The heads' divisibility for --cp-style alltoall is
// ContextAttention's to check in train (its constructor refuses, alike on every rank).
void resolve_context(const LayoutFlags& f, Layout& l) {
    if (l.cp == 1) {
        if (f.cp_style || f.cp_balance)
            throw UsageError(std::string(f.cp_style ? "--cp-style" : "--cp-balance") +
                             " chooses how context parallelism splits attention, and this run has none; add --cp 2 "
                             "or more, or drop it");
        return;
    }
    if (f.cp_style) l.cp_style = parse_context_style(*f.cp_style);
    if (f.cp_balance) l.cp_balance = parse_context_balance(*f.cp_balance);
    if (!l.model.has_sequence())
        throw UsageError("--cp " + text(l.cp) + ": model " + l.model.name + " is an MLP, which has no sequence to "
                         "split; use a gpt or llama model, or --cp 1");
    const bool zigzag = l.cp_balance == ContextBalance::zigzag;
    const int chunks = zigzag ? 2 * l.cp : l.cp;
    if (l.seq_len % chunks != 0)
        throw UsageError("--cp " + text(l.cp) + ": sequence length " + text(l.seq_len) + " does not split into " +
                         text(chunks) + (zigzag ? " chunks (the zigzag balance gives each rank two of 2 x cp)" : " chunks") +
                         "; use a --seq that is a multiple of " + text(chunks) + (zigzag ? ", or --cp-balance none" : ""));
}

// The splits tensor parallelism makes must come out even (Megatron-LM sec. 3): heads, the
// hidden and FFN widths, the vocabulary, and under SP the tokens of a sequence.
void check_tensor_split(const Layout& l) {
    const ModelConfig& m = l.model;
    const int tp = l.tp;
    const std::string flag = "--tp " + text(tp);
    auto divides = [&](int extent, const std::string& what, const std::string& fix) {
        if (extent % tp != 0)
            throw UsageError(flag + ": " + what + " " + text(extent) + " of model " + m.name + " does not split " +
                             text(tp) + " ways; " + fix);
    };
    if (m.kind == ModelKind::mlp) {
        if (l.sp)
            throw UsageError("--sp splits sequences, and model " + m.name + " is an MLP, which has none; drop --sp");
        divides(m.hidden, "hidden size", "use a --tp that divides it");
        return;
    }
    if (l.tp_style == TensorParallelStyle::allgather)
        throw UsageError("--tp-style allgather applies to MLP models; " + model_kind_name(m.kind) +
                         " blocks use Megatron's column/row pairing: drop --tp-style or use an mlp model");
    divides(m.heads, "head count", "use a --tp that divides it (attention heads are split across the group)");
    divides(m.hidden, "hidden size", "use a --tp that divides it");
    // Llama's key/value heads are split when --tp divides them and replicated otherwise
    // (models/llama.cpp), so they need no check.
    if (m.kind == ModelKind::llama)
        divides(m.ffn_hidden, "SwiGLU width (ffn_hidden)", "use a --tp that divides it");
    else
        divides(4 * m.hidden, "FFN size", "use a --tp that divides it");
    divides(m.vocab, "vocabulary", "use a --tp that divides it (the embedding and logits are split by vocabulary)");
    // Under context parallelism a rank holds seq / cp tokens of each sequence, and SP splits those.
    if (l.sp && l.local_seq_len() % tp != 0)
        throw UsageError("--sp: sequence length " + text(l.local_seq_len()) + (l.cp > 1 ? " per --cp rank" : "") +
                         " does not split " + text(tp) + " ways across --tp " + text(tp) +
                         "; use a --seq that is a multiple of " + text(tp * l.cp));
}

// Pipeline stages are cut from transformer blocks; the data-parallel schemes that keep whole
// gradient buffers (DDP, ZeRO-1, as Megatron-LM's distributed optimizer) compose with them in
// parbench's engine, whose other limits (`engine`) frameworks' conventions do not share. Returns
// the layer ranges of the virtual stages (empty without a pipeline).
std::vector<LayerRange> check_pipeline(const Layout& l, const std::vector<int>& stage_layers, bool engine) {
    if (l.pp == 1) {
        if (l.virtual_stages != 1 || !stage_layers.empty())
            throw UsageError("--virtual-stages and --stage-layers cut pipeline stages; they need --pp 2 or more");
        return {};
    }
    const std::string pp = "--pp " + text(l.pp);
    if (!l.model.has_sequence())
        throw UsageError(pp + ": pipeline stages are cut from transformer blocks, and model " + l.model.name +
                         " is an MLP; use a gpt or llama model or --pp 1");
    if (engine) {
        if (l.zero > 1)
            throw UsageError(pp + " with --zero " + text(l.zero) + ": ZeRO-2/3 reduce or gather per micro-batch, "
                             "which a pipeline interleaves; use --zero 0 or 1");
        if (l.overlap || l.prefetch)
            throw UsageError(pp + " with --overlap/--prefetch: a pipeline's backwards of different micro-batches "
                             "interleave, so buckets cannot be launched mid-step; drop them");
        if (l.schedule == ScheduleKind::zero_bubble_h1 && l.sp)
            throw UsageError("--schedule zb-h1 with --sp: the deferred weight gradients would gather the sequence "
                             "again; drop --sp or use another schedule");
        if (l.schedule == ScheduleKind::zero_bubble_h1 && l.recompute == Recompute::full)
            throw UsageError("--recompute full with --schedule zb-h1: the deferred weight gradients need the layer's "
                             "activations after the next layer's recompute overwrote them; use --recompute selective "
                             "or another schedule");
    }
    validate_p2p_mode(l.schedule, l.p2p);
    validate_schedule_shape(l.schedule, l.schedule_shape());
    return virtual_stage_layers(l.model.layers, l.pp, l.virtual_stages, stage_layers);
}

// torchtitan's op-level policy is priced where it was read (theory/activation_memory.hpp): a
// framework's dense Llama job at tp 1 and cp 1 on fused (flash) attention; the engine runs none,
// selective and full only.
void check_selective_op(const Layout& l, const LayoutTarget& target) {
    const std::string flag = "--recompute selective-op";
    if (target.engine)
        throw UsageError(flag + ": parbench's train runs --recompute none, selective or full; selective-op "
                         "(torchtitan's op-level checkpointing) is priced by plan --states zero|megatron only");
    std::string why;
    if (l.model.kind != ModelKind::llama || l.model.moe)
        why = "model " + l.model.name + " is not a dense Llama model";
    else if (l.tp > 1 || l.cp > 1)
        why = "it is priced at --tp 1 and --cp 1 (the collectives it would recompute are not priced)";
    else if (target.degrees_searched)
        why = "it is priced at --tp 1 and --search varies --tp (give the layout)";
    else if (l.attention != AttentionKind::flash)
        why = "it saves the fused attention kernel's output; --attention naive recomputes the core as products";
    if (!why.empty()) throw UsageError(flag + ": " + why + "; use --recompute selective or full");
}

// Recompute and the whole-sequence attention apply to models with a sequence; the attention is
// the engine's choice (theory/engine_attention.hpp), or for a framework's job the one asked for
// or the target's.
void resolve_memory(const LayoutFlags& f, Layout& l, const LayoutTarget& target) {
    const std::string& name = l.model.name;
    if (l.recompute != Recompute::none && !l.model.has_sequence())
        throw UsageError("--recompute " + f.recompute + ": model " + name + " is an MLP, which has no attention core "
                         "or transformer layer to recompute; use --recompute none or a gpt or llama model");
    const std::string requested = f.attention.value_or("auto");
    if (requested != "auto" && !l.model.has_sequence())
        throw UsageError("--attention " + requested + ": model " + name + " is an MLP, which has no attention; drop "
                         "--attention or pick a gpt or llama model");
    if (target.engine)
        l.attention = engine_attention(requested, target.block_attention_tiles, l.seq_len, l.cp);
    else
        l.attention = requested == "auto" ? target.auto_attention : parse_attention(requested);
    if (l.recompute == Recompute::selective_op) check_selective_op(l, target);
}

// dp x tp x pp x cp must be the world; without --dp, dp fills it. Returns dp.
int check_world(std::optional<int> dp, const Layout& l, const WorldSize& world) {
    const std::string cp_factor = l.cp > 1 ? " x --cp " + text(l.cp) : "";
    const int others = l.tp * l.pp * l.cp;
    if (!dp && world.count % others != 0)
        throw UsageError("--tp " + text(l.tp) + " x --pp " + text(l.pp) + cp_factor + " does not divide the " +
                         text(world.count) + " " + world.noun + "; change the degrees or " + world.source);
    const int degree = dp ? *dp : world.count / others;
    const long long product = static_cast<long long>(degree) * others;
    if (product != world.count)
        throw UsageError("--dp " + text(degree) + " x --tp " + text(l.tp) + " x --pp " + text(l.pp) + cp_factor +
                         " = " + std::to_string(product) + " " + world.noun + ", but " + world.source + " is " +
                         text(world.count) + "; make the product equal " + world.source +
                         " (or leave --dp out to fill them)");
    return degree;
}

// The world's degree, and the global batch in dp x micro-batches equal micro-batches; checked
// once the world is known (and not searched).
void resolve_world_and_batch(const LayoutFlags& f, Layout& l, const LayoutTarget& target) {
    const bool checked = target.world && !target.degrees_searched;
    if (target.degrees_searched) l.dp = 1;
    if (checked) l.dp = check_world(f.dp, l, *target.world);
    l.global_batch = f.global_batch                 ? *f.global_batch
                     : target.default_global_batch ? *target.default_global_batch
                                                   : std::max(1, l.dp * l.microbatches);
    const int split = l.dp * l.microbatches;
    if (checked && l.global_batch % split != 0)
        throw UsageError("--global-batch " + text(l.global_batch) +
                         (f.global_batch ? std::string() : target.default_global_batch_note) +
                         " does not divide into --dp " + text(l.dp) + " x --microbatches " + text(l.microbatches) +
                         " = " + text(split) + " equal micro-batches; use a multiple of " + text(split));
    l.microbatch_size = l.global_batch / split;
}

// The gradient bucket: --bucket-mb, or the default for the ZeRO stage and this rank's share of
// the parameters (theory/memory.hpp).
void resolve_bucket(const LayoutFlags& f, Layout& l, const LayoutTarget& target) {
    if (f.bucket_mb) {
        l.bucket_bytes = static_cast<std::size_t>(*f.bucket_mb * 1024.0 * 1024.0);
        if (l.bucket_bytes < sizeof(float)) throw UsageError("--bucket-mb is smaller than one parameter");
        l.bucket_source = "--bucket-mb";
        return;
    }
    // A search forms its own tp degrees: the flags' tp is not one of its layouts.
    const TensorSplit split = target.degrees_searched ? TensorSplit{} : l.tensor_split(0);
    l.bucket_bytes = default_bucket_bytes(l.zero, model_parameter_layout(l.model, l.seq_len, split).total_numel());
    l.bucket_source = default_bucket_rule(l.zero);
}

}  // namespace

void check_layout_flag_ranges(const LayoutFlags& f) {
    using namespace layout_limits;
    if (f.dp) check_int(*f.dp, "--dp", 1, max_ranks);
    for (const auto& [value, flag] : {std::pair{f.tp, "--tp"}, std::pair{f.pp, "--pp"}, std::pair{f.cp, "--cp"}})
        check_int(value, flag, 1, max_ranks);
    checked_product({static_cast<std::uint64_t>(f.dp.value_or(1)), static_cast<std::uint64_t>(f.tp),
                     static_cast<std::uint64_t>(f.pp), static_cast<std::uint64_t>(f.cp)},
                    f.dp ? "--dp x --tp x --pp x --cp" : "--tp x --pp x --cp", max_ranks,
                    "that many ranks is beyond what parbench models");
    if (f.ep) check_int(*f.ep, "--ep", 1, max_ranks);
    if (f.etp) check_int(*f.etp, "--etp", 1, max_ranks);
    check_int(f.zero, "--zero", 0, 3);
    check_int(f.microbatches, "--microbatches", 1, max_microbatches);
    check_int(f.virtual_stages, "--virtual-stages", 1, model_limits::max_layers);
    checked_product({static_cast<std::uint64_t>(f.pp), static_cast<std::uint64_t>(f.microbatches),
                     static_cast<std::uint64_t>(f.virtual_stages)},
                    "--pp x --microbatches x --virtual-stages", max_schedule_slots,
                    "a schedule holds up to that many slots; lower one of them");
    if (f.global_batch) check_int(*f.global_batch, "--global-batch", 1, max_global_batch);
    if (f.bucket_mb) check_number(*f.bucket_mb, "--bucket-mb", 0, max_bucket_mib, true);
}

// The stages run in the order train has always checked them, so that a layout with several
// faults is refused for the same one by every command.
Layout resolve_layout(const LayoutFlags& flags, const ModelConfig& model, int seq_len, const LayoutTarget& target) {
    check_layout_flag_ranges(flags);
    Layout l = read_flags(flags, model, seq_len, target);
    if (target.engine) check_engine_model(model);
    check_moe(flags, l, target);
    resolve_context(flags, l);
    if (!target.degrees_searched) {
        check_tensor_split(l);
        l.stage_ranges = check_pipeline(l, flags.stage_layers, target.engine);
        if (l.moe.a2a_overlap_1f1b) check_moe_a2a_overlap_1f1b_stages(l.model, l.stage_ranges);
    }
    resolve_memory(flags, l, target);
    resolve_world_and_batch(flags, l, target);
    if (target.world && !target.degrees_searched) {
        check_expert_parallel(l.model, l.ep, l.dp, l.cp);
        check_expert_tensor_parallel(l.model, l.etp, l.tp, target.engine && l.sp);
    }
    resolve_bucket(flags, l, target);
    return l;
}

}  // namespace parbench

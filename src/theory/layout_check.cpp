#include "theory/layout_check.hpp"

#include <string>

#include "core/error.hpp"
#include "theory/pipeline/partition.hpp"

namespace parbench {
namespace {

std::string text(int value) { return std::to_string(value); }

}  // namespace

void check_degrees(int tp, int pp, int cp, int zero, int microbatches, bool sp, bool prefetch,
                   TensorParallelStyle style) {
    if (tp < 1 || pp < 1) throw UsageError("--tp and --pp must be at least 1");
    if (cp < 1) throw UsageError("--cp must be at least 1 (the ranks that split each sequence)");
    if (zero < 0 || zero > 3) throw UsageError("--zero " + text(zero) + ": use 0, 1, 2 or 3");
    if (microbatches < 1) throw UsageError("--microbatches must be at least 1");
    if (sp && tp < 2)
        throw UsageError("--sp splits the sequence across the tensor-parallel group; it needs --tp 2 or more");
    if (style == TensorParallelStyle::allgather && tp < 2)
        throw UsageError("--tp-style allgather splits every layer across the tensor-parallel group; it needs --tp 2 "
                         "or more");
    if (prefetch && zero != 3)
        throw UsageError("--prefetch gathers the next layer's parameters, which only ZeRO-3 shards; add --zero 3 or "
                         "drop --prefetch");
}

// The splits tensor parallelism makes must come out even (Megatron-LM sec. 3): heads, the
// hidden and FFN widths, the vocabulary, and under SP the tokens of a sequence.
void check_tensor_split(const ModelConfig& m, int tp, bool sp, TensorParallelStyle style, int local_seq, int cp) {
    const std::string flag = "--tp " + text(tp);
    auto divides = [&](int extent, const std::string& what, const std::string& fix) {
        if (extent % tp != 0)
            throw UsageError(flag + ": " + what + " " + text(extent) + " of model " + m.name + " does not split " +
                             text(tp) + " ways; " + fix);
    };
    if (m.kind == ModelKind::mlp) {
        if (sp)
            throw UsageError("--sp splits sequences, and model " + m.name + " is an MLP, which has none; drop --sp");
        divides(m.hidden, "hidden size", "use a --tp that divides it");
        return;
    }
    if (style == TensorParallelStyle::allgather)
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
    if (sp && local_seq % tp != 0)
        throw UsageError("--sp: sequence length " + text(local_seq) + (cp > 1 ? " per --cp rank" : "") +
                         " does not split " + text(tp) + " ways across --tp " + text(tp) +
                         "; use a --seq that is a multiple of " + text(tp * cp));
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

void check_context_sequence(int seq_len, int cp, ContextBalance balance) {
    const bool zigzag = balance == ContextBalance::zigzag;
    const int chunks = zigzag ? 2 * cp : cp;
    if (seq_len % chunks != 0)
        throw UsageError("--cp " + text(cp) + ": sequence length " + text(seq_len) + " does not split into " +
                         text(chunks) + (zigzag ? " chunks (the zigzag balance gives each rank two of 2 x cp)" : " chunks") +
                         "; use a --seq that is a multiple of " + text(chunks) + (zigzag ? ", or --cp-balance none" : ""));
}

// Context parallelism splits every sequence over the cp group: c contiguous chunks (balance
// none), or 2c chunks of which each rank holds one from each end (zigzag). The heads'
// divisibility for --cp-style alltoall is ContextAttention's to check in train (its
// constructor refuses, alike on every rank).
ContextChoice check_context_parallel(const ModelConfig& model, int seq_len, const ContextRequest& r) {
    if (r.cp < 1) throw UsageError("--cp must be at least 1 (the ranks that split each sequence)");
    ContextChoice choice;
    if (r.cp == 1) {
        if (r.style || r.balance)
            throw UsageError(std::string(r.style ? "--cp-style" : "--cp-balance") +
                             " chooses how context parallelism splits attention, and this run has none; add --cp 2 "
                             "or more, or drop it");
        return choice;
    }
    if (r.style) choice.style = parse_context_style(*r.style);
    if (r.balance) choice.balance = parse_context_balance(*r.balance);
    if (!model.has_sequence())
        throw UsageError("--cp " + text(r.cp) + ": model " + model.name + " is an MLP, which has no sequence to split; "
                         "use a gpt or llama model, or --cp 1");
    check_context_sequence(seq_len, r.cp, choice.balance);
    return choice;
}

// Pipeline stages are cut from transformer blocks; the data-parallel schemes that keep whole
// gradient buffers (DDP, ZeRO-1, as Megatron-LM's distributed optimizer) compose with them in
// parbench's engine.
std::vector<LayerRange> check_pipeline(const ModelConfig& model, const PipelineRequest& r) {
    if (r.pp == 1) {
        if (r.virtual_stages != 1 || !r.stage_layers.empty())
            throw UsageError("--virtual-stages and --stage-layers cut pipeline stages; they need --pp 2 or more");
        return {};
    }
    const std::string pp = "--pp " + text(r.pp);
    if (!model.has_sequence())
        throw UsageError(pp + ": pipeline stages are cut from transformer blocks, and model " + model.name +
                         " is an MLP; use a gpt or llama model or --pp 1");
    if (r.engine) {
        if (r.zero > 1)
            throw UsageError(pp + " with --zero " + text(r.zero) + ": ZeRO-2/3 reduce or gather per micro-batch, "
                             "which a pipeline interleaves; use --zero 0 or 1");
        if (r.overlap || r.prefetch)
            throw UsageError(pp + " with --overlap/--prefetch: a pipeline's backwards of different micro-batches "
                             "interleave, so buckets cannot be launched mid-step; drop them");
        if (r.schedule == ScheduleKind::zero_bubble_h1 && r.sp)
            throw UsageError("--schedule zb-h1 with --sp: the deferred weight gradients would gather the sequence "
                             "again; drop --sp or use another schedule");
        if (r.schedule == ScheduleKind::zero_bubble_h1 && r.recompute == Recompute::full)
            throw UsageError("--recompute full with --schedule zb-h1: the deferred weight gradients need the layer's "
                             "activations after the next layer's recompute overwrote them; use --recompute selective "
                             "or another schedule");
    }
    validate_p2p_mode(r.schedule, r.p2p);
    validate_schedule_shape(r.schedule, ScheduleShape{r.pp, r.microbatches, r.virtual_stages});
    return virtual_stage_layers(model.layers, r.pp, r.virtual_stages, r.stage_layers);
}

int check_world(std::optional<int> dp, int tp, int pp, int cp, const WorldSize& world) {
    const std::string cp_factor = cp > 1 ? " x --cp " + text(cp) : "";
    int degree = 0;
    if (dp) {
        degree = *dp;
        if (degree < 1) throw UsageError("--dp must be at least 1");
    } else {
        if (world.count % (tp * pp * cp) != 0)
            throw UsageError("--tp " + text(tp) + " x --pp " + text(pp) + cp_factor + " does not divide the " +
                             text(world.count) + " " + world.noun + "; change the degrees or " + world.source);
        degree = world.count / (tp * pp * cp);
    }
    const long long product = static_cast<long long>(degree) * tp * pp * cp;
    if (product != world.count)
        throw UsageError("--dp " + text(degree) + " x --tp " + text(tp) + " x --pp " + text(pp) + cp_factor + " = " +
                         std::to_string(product) + " " + world.noun + ", but " + world.source + " is " +
                         text(world.count) + "; make the product equal " + world.source +
                         " (or leave --dp out to fill them)");
    return degree;
}

void check_global_batch(int global_batch, int dp, int microbatches, const std::string& note) {
    if (global_batch % (dp * microbatches) != 0)
        throw UsageError("--global-batch " + text(global_batch) + note + " does not divide into --dp " + text(dp) +
                         " x --microbatches " + text(microbatches) + " = " + text(dp * microbatches) +
                         " equal micro-batches; use a multiple of " + text(dp * microbatches));
}

}  // namespace parbench

#include "theory/memory.hpp"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>

#include "core/error.hpp"
#include "theory/context_parallel.hpp"
#include "theory/engine_attention.hpp"
#include "theory/gpt_buffers.hpp"
#include "theory/llama_buffers.hpp"
#include "theory/matmul_buffers.hpp"
#include "theory/model_layout.hpp"
#include "theory/moe_buffers.hpp"
#include "theory/moe_memory.hpp"
#include "theory/pipeline/partition.hpp"
#include "theory/rank_traffic.hpp"
#include "theory/transformer_buffers.hpp"
#include "theory/zero_partition.hpp"

namespace parbench {
namespace {

constexpr double f32 = 4.0;

class ItemList {
  public:
    explicit ItemList(RankMemory& memory) : memory_(memory) {}
    void add(MemoryCategory category, const std::string& name, double count, double bytes_each, bool buffer = false) {
        if (count > 0.0) memory_.items.push_back(MemoryItem{category, name, count, bytes_each, buffer});
    }
    void activation(const std::string& name, double count, double floats) {
        add(MemoryCategory::activations, name, count, floats * f32);
    }
    // Activation buffers of a size table (elements of 4 bytes) as one item: `repeat` sets of
    // `sizes`, which must be alike (the item counts repeat x their number of one size).
    void alike(const std::string& name, double repeat, std::initializer_list<std::size_t> sizes) {
        const std::size_t first = *sizes.begin();
        for (std::size_t size : sizes)
            if (size != first) throw std::logic_error("theory/memory: the buffers of \"" + name + "\" differ in size");
        if (first > 0) activation(name, repeat * static_cast<double>(sizes.size()), static_cast<double>(first));
    }
    // ... summed into one buffer's worth; none when they are all 0 (not taken by this layout).
    void summed(const std::string& name, std::initializer_list<std::size_t> sizes) {
        std::size_t total = 0;
        for (std::size_t size : sizes) total += size;
        if (total > 0) activation(name, 1, static_cast<double>(total));
    }

  private:
    RankMemory& memory_;
};

// train/schemes/data_parallel.cpp and train/schemes/zero.cpp, one scheme over `layout` whose
// ZeRO shards are 1/`ranks`. `units_held`: the most parameter units the model holds at once
// (ZeRO-3's gather slots); `what` prefixes the items' names.
void one_scheme_items(const Layout& l, const ParameterLayout& layout, int ranks, int units_held,
                      const std::string& what, ItemList& items) {
    const bool zero3 = l.zero == 3;
    const FlatLayout flat(layout, zero3 ? one_unit_per_group(layout) : group_units_by_bytes(layout, l.bucket_bytes),
                          l.zero == 0 ? 1 : ranks);
    const double full = static_cast<double>(flat.padded_numel()) * f32;
    const double shard = static_cast<double>(flat.shard_numel()) * f32;
    const double slot = static_cast<double>(flat.largest_segment_numel()) * f32;
    using C = MemoryCategory;
    if (l.zero == 0) {
        items.add(C::params, what + "parameters", 1, full);
        items.add(C::grads, what + "gradients", 1, full);
        items.add(C::optimizer, what + "AdamW m, v", 2, full);
        return;
    }
    items.add(C::optimizer, what + "AdamW m, v shards (1/dp)", 2, shard);
    items.add(C::grads, what + "gradient shard (1/dp)", 1, shard);
    if (l.zero == 1) {
        items.add(C::grads, what + "full gradients", 1, full);
    } else {
        items.add(C::grads, what + (zero3 ? "gradient slots (largest layer)" : "gradient slots (largest bucket)"),
                  zero_gradient_slots(l.overlap), slot, true);
        if (l.microbatches > 1)
            items.add(C::grads, what + "staging shard (micro-batches after the first)", 1, shard, true);
    }
    if (zero3) {
        items.add(C::params, what + "parameter shard (1/dp)", 1, shard);
        items.add(C::params, what + "parameter gather slots (largest layer)", zero_gather_slots(units_held, l.prefetch), slot,
                  true);
    } else {
        items.add(C::params, what + "parameters", 1, full);
    }
}

// train/schemes/expert_split.cpp: the dense units under one scheme over the gradient group
// (dp x cp), an MoE model's routed experts (this rank's E/ep) under another over the
// expert-data-parallel group (dp x cp / ep), each holding one unit at a time.
void scheme_items(const Layout& l, const ParameterLayout& layout, int units_held, ItemList& items) {
    const std::vector<int> experts = layout.routed_expert_units();
    if (experts.empty()) return one_scheme_items(l, layout, l.gradient_ranks(), units_held, "", items);
    one_scheme_items(l, layout.select_units(layout.dense_units()), l.gradient_ranks(), units_held, "dense: ", items);
    one_scheme_items(l, layout.select_units(experts), expert_data_parallel_size(l.gradient_ranks(), l.ep), 1,
                     "routed experts (this rank's E/ep; shards 1/(dp x cp / ep)): ", items);
}

// The MoE layer's shape as train builds it (train/models/gpt.cpp, llama.cpp): `tokens` rows per
// routing group; empty without "moe".
MoeMemoryShape engine_moe_memory_shape(const Layout& l, double tokens) {
    if (!l.model.moe) return {};
    const ModelConfig::Moe& moe = *l.model.moe;
    return MoeMemoryShape{static_cast<std::size_t>(tokens),       static_cast<std::size_t>(l.model.hidden),
                          static_cast<std::size_t>(moe.experts),  static_cast<std::size_t>(moe.top_k),
                          static_cast<std::size_t>(moe.expert_hidden), static_cast<std::size_t>(moe.shared_experts),
                          static_cast<std::size_t>(l.ep),         moe.activation,
                          static_cast<std::size_t>(l.etp)};
}

// bf16 operand copies of the largest matmul: theory/matmul_buffers.hpp's table, which
// train/matmuls.cpp allocates.
void matmul_items(const Layout& l, const std::vector<MatmulShape>& shapes, ItemList& items) {
    const Bf16OperandBuffers copies = bf16_operand_buffers(l.precision, shapes);
    if (copies.bytes() == 0) return;
    items.add(MemoryCategory::activations, "bf16 operand copies (input, weight, output gradient)", 1,
              static_cast<double>(copies.bytes()));
}

// What a transformer keeps per layer and at its ends (element counts; items.activation counts
// fp32 bytes; the ends are the frame's table, theory/transformer_buffers.hpp): without a pipeline every layer's stores and the embedding/head buffers; with one,
// the rank's activation pool shared by its chunks (theory/pipeline/partition.hpp's
// activation_pool, what train/models/transformer_parts.hpp allocates): slots of boundary
// tensors, layer stores (with the zero-bubble stash) and, on the last stage, the head's.
// Returns whether this rank holds the head. Shared by the GPT and Llama items.
// `moe_block`: what an MoE layer keeps instead of `block` (models with "moe"); its stores are a
// kind of their own unless full recompute makes every layer keep the same. An MoE layer defers
// nothing to W, so only the dense stores have a zero-bubble stash (zb-h1 refuses full recompute).
bool layer_store_items(const Layout& l, const PipelinePart& part, const std::string& norm, double block,
                       double stash, const DecoderFrameBuffers& frame, ItemList& items, double moe_block = 0.0) {
    const auto head = static_cast<double>(frame.head.total());
    const std::string moe_stores = "MoE layer stores: attention, router, dispatch/combine buffers, expert activations";
    if (!part.active()) {
        double moe = 0;
        for (int layer = 0; layer < l.model.layers; ++layer) moe += l.model.moe && l.model.moe->is_moe_layer(layer);
        items.activation("layer stores (per layer)", l.model.layers - moe, block);
        items.activation(moe_stores + " (per MoE layer)", moe, moe_block);
        items.alike("embedding output, backward running gradient", 1, {frame.boundary_input, frame.boundary_gradient});
        items.activation("final " + norm + ", logits, softmax stats", 1, head);
        return true;
    }
    const ActivationPool pool = activation_pool(part, transformer_layer_store_kinds(l.model, l.recompute));
    const double dense = pool.layer_stores.at(0);
    const double moe = pool.layer_stores.size() > 1 ? pool.layer_stores[1] : 0.0;
    const std::string what = "activation pool (the schedule's peak held at once over the rank's chunks)";
    items.activation(what + ": layer stores", dense, block);
    items.activation(what + ": " + moe_stores, moe, moe_block);
    if (part.split_backward) items.activation(what + ": zero-bubble weight-gradient stash", dense, stash);
    items.alike(what + ": boundary input and gradient", pool.slots, {frame.boundary_input, frame.boundary_gradient});
    items.activation(what + ": final " + norm + ", logits, softmax stats", pool.heads, head);
    return pool.heads > 0;
}

// What a model with MoE layers allocates once for all of them (theory/moe_buffers.hpp: the MoE
// layer's scratch; under SP, the gradient pack). Shared by GPT and Llama.
void moe_shared_items(const Layout& l, const MoeMemoryShape& moe_shape, ItemList& items) {
    items.summed("MoE scratch, shared by the MoE layers (theory/moe_memory.hpp)", {moe_scratch_buffers(moe_shape).total()});
    if (l.sp)
        items.summed("sequence-parallel MoE gradient pack (router, shared and this rank's experts)",
                     {moe_gradient_pack_buffers(moe_shape).total()});
}

// What one layer's attention keeps for backward (`saved`) and the workspace every layer shares, by
// the attention the engine runs: context parallelism's blocks (train/context/), the whole-sequence
// block attention's lse rows (train/ops/sequence_attention.hpp), or the standard attention's
// probabilities (its workspace is three arrays of that size).
struct AttentionFloats {
    double saved = 0, workspace = 0;
};

AttentionFloats attention_floats(const Layout& l, bool context, bool block_attention, double probabilities) {
    const TensorSplit split{0, l.tp, l.sp, l.tp_style};
    if (context) {
        const ContextAttentionFloats f = context_attention_floats(
            context_local_gqa_shape(l.model, l.microbatch_size, l.local_seq_len(), split), l.context_split(), l.seq_len);
        return {static_cast<double>(f.saved), static_cast<double>(f.workspace)};
    }
    if (block_attention) {
        const SequenceAttentionFloats f =
            sequence_attention_floats(context_local_gqa_shape(l.model, l.microbatch_size, l.seq_len, split));
        return {static_cast<double>(f.saved), static_cast<double>(f.workspace)};
    }
    return {probabilities, probabilities};
}

void attention_workspace_item(bool context, bool block_attention, const AttentionFloats& attention,
                              const DecoderFrameBuffers& frame, ItemList& items) {
    if (context)
        items.activation("context-parallel attention workspace (train/context/)", 1, attention.workspace);
    else if (block_attention)
        items.activation("block attention workspace (row statistics, score tiles: train/ops/sequence_attention.hpp)",
                         1, attention.workspace);
    else
        items.alike("attention scratch (scores, their gradient, probabilities' gradient)", 1,
                    {frame.preatt, frame.dpreatt, frame.datt});
}

// The frame's table (theory/transformer_buffers.hpp) for this layout, as the engine builds it.
DecoderFrameBuffers frame_buffers(const Layout& l, bool standard_attention) {
    return decoder_frame_buffers(decoder_frame_shape(l.model, l.tp, l.sp, static_cast<std::size_t>(l.microbatch_size),
                                                     static_cast<std::size_t>(l.local_seq_len()), standard_attention,
                                                     l.recompute == Recompute::selective));
}

void microbatch_items(const Layout& l, const DecoderFrameBuffers& frame, ItemList& items) {
    items.alike("tokens, targets, losses (per micro-batch)", l.microbatches,
                {frame.microbatch.tokens, frame.microbatch.targets, frame.microbatch.losses});
}

// The scratch every layer's pass reuses: the projection's output and the loss's gradients.
void frame_scratch_items(const DecoderFrameBuffers& frame, ItemList& items) {
    items.alike("projection output, normalised-input gradient", 1, {frame.projection, frame.dnormed});
    items.summed("backward scratch (loss gradients, logits gradient)", {frame.dlosses, frame.dlogits});
}

void sequence_parallel_items(const DecoderFrameBuffers& frame, const std::string& norm, ItemList& items) {
    items.alike("sequence-parallel gathers (forward, backward)", 1, {frame.gathered, frame.dgathered});
    items.alike("sequence-parallel local chunks", 1, {frame.projection_local, frame.dnormed_local});
    items.summed("sequence-parallel " + norm + " gradient pack", {frame.norm_pack});
}

// train/models/transformer_model.hpp's allocate_activations for GPT: per-micro-batch data,
// per-layer stores (in pipeline slots when pipelined), the head's, and the backward scratch
// shared by every layer. Under context parallelism and block attention as llama_items says,
// and under context parallelism the gathered position rows and their gradient.
void gpt_items(const Layout& l, const PipelinePart& part, ItemList& items) {
    const double t = l.tp;
    const bool context = l.cp > 1;
    const bool block_attention = !context && l.attention == AttentionKind::flash;
    const double B = l.microbatch_size, T = l.local_seq_len();
    const double rows = B * T;
    const double R = l.sp ? rows / t : rows;  // LayerNorm / residual regions
    const AttentionFloats attention = attention_floats(l, context, block_attention, B * (l.model.heads / t) * T * T);
    const double att = attention.saved;
    // A layer's own buffers: GPT's table (theory/gpt_buffers.hpp), which train/models/gpt.cpp allocates.
    const GptBlockBuffers layer =
        gpt_block_buffers(l.model, l.tp, static_cast<std::size_t>(rows), static_cast<std::size_t>(R));
    const double dense_mlp = static_cast<double>(layer.fch + layer.fch_gelu);
    const auto rc = static_cast<double>(layer.residual3);  // a layer's own under full recompute: its output
    const double full_block = static_cast<double>(layer.kept(true)) + att;
    // What a layer keeps as its own under --recompute (transformer_model.hpp's allocate_block),
    // and the one set all layers share (the frame's table).
    const DecoderFrameBuffers frame = frame_buffers(l, !context && !block_attention);
    const bool shares_probabilities = frame.shared_probabilities > 0;
    const double block = l.recompute == Recompute::full ? rc : shares_probabilities ? full_block - att : full_block;
    // An MoE layer keeps the MoE layer's buffers (theory/moe_memory.hpp) in place of the MLP's two.
    const int moe_count = l.model.moe_layer_count();
    // An MoE layer routes the rank's R rows (B·T/t under SP: train/models/gpt.cpp, llama.cpp).
    const MoeMemoryShape moe_shape = engine_moe_memory_shape(l, R);
    const double moe_kept = static_cast<double>(moe_kept_buffers(moe_shape).total());
    const double moe_block = l.recompute == Recompute::full ? rc : block - dense_mlp + moe_kept;
    if (l.recompute == Recompute::full)
        items.activation("full recompute: one layer's buffers, shared", 1,
                         (moe_count < l.model.layers ? full_block : full_block - dense_mlp) +
                             (moe_count > 0 ? moe_kept : 0.0));
    if (shares_probabilities)
        items.activation("selective recompute: probabilities, shared", 1, static_cast<double>(frame.shared_probabilities));
    const double stash = static_cast<double>(
        gpt_stash_buffers(l.model, l.tp, static_cast<std::size_t>(rows)).total());

    microbatch_items(l, frame, items);
    const bool holds_head = layer_store_items(l, part, "LayerNorm", block, stash, frame, items, moe_block);
    if (moe_count > 0) moe_shared_items(l, moe_shape, items);
    attention_workspace_item(context, block_attention, attention, frame, items);
    // The layers' scratch: GPT's table (theory/gpt_buffers.hpp).
    const GptScratchBuffers scratch = gpt_scratch_buffers(l.model, l.tp, static_cast<std::size_t>(rows),
                                                          static_cast<std::size_t>(T), context);
    items.alike("position rows held and their gradient (context parallelism)", 1,
                {scratch.positions, scratch.dpositions});
    frame_scratch_items(frame, items);
    items.summed("backward scratch (FFN x2, attention output, QKV)",
                 {frame.dwide, scratch.dfc, scratch.datty, scratch.dqkv});
    sequence_parallel_items(frame, "LayerNorm", items);
    const auto N = static_cast<std::size_t>(rows);
    matmul_items(l,
                 decoder_matmul_shapes(gpt_block_matmul_shapes(l.model, l.tp, N, context), l.model, l.tp, N,
                                       holds_head, moe_count > 0 ? &moe_shape : nullptr),
                 items);
}

// train/models/llama.cpp: the GPT's structure with RMSNorm (no mean), separate q/k/v with
// key/value heads split when tp divides them (else replicated, with a gradient pack for their
// partial weight gradients), a three-matrix SwiGLU, and an untied head. Under context
// parallelism every per-token buffer holds seq / cp tokens, each layer keeps ContextAttention's
// saved state instead of the probabilities (also under selective recompute, which then shares
// nothing), there is no attention scratch of the model's own, and ContextAttention's workspace
// is counted once. Block attention over the whole sequence (l.attention flash, no cp) the same
// way: the log-sum-exp rows per layer, SequenceAttention's workspace once.
void llama_items(const Layout& l, const PipelinePart& part, ItemList& items) {
    const double t = l.tp;
    const bool context = l.cp > 1;
    const bool block_attention = !context && l.attention == AttentionKind::flash;
    const double B = l.microbatch_size, T = l.local_seq_len();
    const double rows = B * T;
    const double R = l.sp ? rows / t : rows;
    const double probabilities = B * (l.model.heads / t) * T * T;
    const AttentionFloats attention = attention_floats(l, context, block_attention, probabilities);
    const double att = attention.saved;
    // A layer's own buffers: Llama's table (theory/llama_buffers.hpp), which train/models/llama.cpp allocates.
    const LlamaBlockBuffers layer =
        llama_block_buffers(l.model, l.tp, static_cast<std::size_t>(rows), static_cast<std::size_t>(R));
    const double dense_mlp = static_cast<double>(layer.gate + layer.up + layer.glu);
    const auto rc = static_cast<double>(layer.residual3);  // a layer's own under full recompute: its output
    const double full_block = static_cast<double>(layer.kept(true)) + att;
    const DecoderFrameBuffers frame = frame_buffers(l, !context && !block_attention);
    const bool shares_probabilities = frame.shared_probabilities > 0;
    const double block = l.recompute == Recompute::full ? rc : shares_probabilities ? full_block - att : full_block;
    // An MoE layer keeps the MoE layer's buffers (theory/moe_memory.hpp, on every tp rank: the
    // layer runs replicated over tp) in place of the SwiGLU's three.
    const int moe_count = l.model.moe_layer_count();
    // An MoE layer routes the rank's R rows (B·T/t under SP: train/models/gpt.cpp, llama.cpp).
    const MoeMemoryShape moe_shape = engine_moe_memory_shape(l, R);
    const double moe_kept = static_cast<double>(moe_kept_buffers(moe_shape).total());
    const double moe_block = l.recompute == Recompute::full ? rc : block - dense_mlp + moe_kept;
    const double full_recompute_work = (moe_count < l.model.layers ? full_block : full_block - dense_mlp) +
                                       (moe_count > 0 ? moe_kept : 0.0);
    const double stash = static_cast<double>(
        llama_stash_buffers(l.model, l.tp, static_cast<std::size_t>(rows)).total());

    microbatch_items(l, frame, items);
    if (l.recompute == Recompute::full)
        items.activation("full recompute: one layer's buffers, shared", 1, full_recompute_work);
    if (shares_probabilities)
        items.activation("selective recompute: probabilities, shared", 1, static_cast<double>(frame.shared_probabilities));
    const bool holds_head = layer_store_items(l, part, "RMSNorm", block, stash, frame, items, moe_block);
    if (moe_count > 0) moe_shared_items(l, moe_shape, items);
    attention_workspace_item(context, block_attention, attention, frame, items);
    frame_scratch_items(frame, items);
    // The layers' scratch: Llama's table (theory/llama_buffers.hpp).
    const LlamaScratchBuffers scratch =
        llama_scratch_buffers(l.model, l.tp, static_cast<std::size_t>(rows), static_cast<std::size_t>(T));
    items.summed("backward scratch (SwiGLU x3, attention output, q, k, v)",
                 {frame.dwide, scratch.dgate, scratch.dup, scratch.datty, scratch.dq, scratch.dk, scratch.dv});
    items.summed("replicated key/value weight-gradient pack", {scratch.kv_gradients});
    sequence_parallel_items(frame, "RMSNorm", items);
    items.summed("rotary positions", {scratch.positions});
    const auto N = static_cast<std::size_t>(rows);
    matmul_items(l,
                 decoder_matmul_shapes(llama_block_matmul_shapes(l.model, l.tp, N), l.model, l.tp, N, holds_head,
                                       moe_count > 0 ? &moe_shape : nullptr),
                 items);
}

// train/models/mlp.cpp's buffer table (theory/mlp_buffers.hpp), summed.
void mlp_items(const Layout& l, ItemList& items) {
    const MlpBuffers buffers = mlp_buffers(l.model, TensorSplit{0, l.tp, l.sp, l.tp_style}, l.microbatch_size,
                                           l.microbatches, l.precision);
    auto floats = [](std::size_t count) { return static_cast<double>(count); };
    items.activation("inputs, targets, losses (per micro-batch)", l.microbatches, floats(buffers.per_microbatch()));
    items.activation("layer stores (all layers)", 1, floats(buffers.layer_stores()));
    items.activation("backward scratch (loss gradient, two activation gradients)", 1,
                     floats(buffers.backward_scratch()));
    items.activation("allgather-style scratch (slice, gathered gradient)", buffers.allgather_scratch() > 0 ? 1 : 0,
                     floats(buffers.allgather_scratch()));
    items.activation("weight-gradient piece (AdamW fused with the weight gradient)", buffers.piece > 0 ? 1 : 0,
                     floats(buffers.piece));
    matmul_items(l, buffers.matmuls, items);
}

}  // namespace

std::optional<EnginePipeline> engine_pipeline(const Layout& l) {
    if (l.pp <= 1) return std::nullopt;
    EnginePipeline pipeline{make_schedule(l.schedule, ScheduleShape{l.pp, l.microbatches, l.virtual_stages}), {}, {}, {}};
    pipeline.occupancy = chunk_occupancy(pipeline.schedule, l.p2p);
    pipeline.in_flight = peak_in_flight(pipeline.occupancy, l.virtual_stages);
    pipeline.passes = pass_counts(pipeline.schedule);
    return pipeline;
}

std::vector<LayerRange> engine_rank_chunks(const Layout& l, int pp_rank) {
    std::vector<LayerRange> chunks;
    for (int c = 0; c < l.virtual_stages; ++c)
        chunks.push_back(l.stage_ranges.at(static_cast<std::size_t>(c * l.pp + pp_rank)));
    return chunks;
}

EngineRank engine_rank_unscheduled(const Layout& l, int pp_rank, const ParameterLayout* whole) {
    const TensorSplit split{0, l.tp, l.sp, l.tp_style};
    // Every rank of an ep group holds as many experts: rank 0's layout counts them all.
    std::optional<ParameterLayout> built;
    if (whole == nullptr) whole = &built.emplace(model_parameter_layout(l.model, l.seq_len, split, l.expert_split()));
    EngineRank rank;
    if (l.pp == 1) {
        rank.layout = built ? std::move(*built) : *whole;
        return rank;
    }
    rank.part.chunks = engine_rank_chunks(l, pp_rank);
    rank.layout = whole->select_units(pipeline_part_units(l.model, rank.part));
    return rank;
}

EngineRank engine_rank(const Layout& l, int pp_rank, const EnginePipeline* pipeline, const ParameterLayout* whole) {
    EngineRank rank = engine_rank_unscheduled(l, pp_rank, whole);
    if (l.pp == 1) return rank;
    std::optional<EnginePipeline> built_pipeline;
    if (pipeline == nullptr) pipeline = &built_pipeline.emplace(*engine_pipeline(l));
    // pipeline_part (theory/pipeline/partition.cpp) with the peak computed once.
    rank.part.split_backward = pipeline->schedule.split_backward;
    rank.part.slots = pipeline->in_flight.at(static_cast<std::size_t>(pp_rank));
    rank.part.occupancy = pipeline->occupancy.at(static_cast<std::size_t>(pp_rank));
    return rank;
}

double RankMemory::of(MemoryCategory category) const {
    double bytes = 0;
    for (const MemoryItem& item : items)
        if (item.category == category) bytes += item.bytes();
    return bytes;
}

double RankMemory::total() const {
    double bytes = 0;
    for (const MemoryItem& item : items) bytes += item.bytes();
    return bytes;
}

RankMemory engine_rank_memory(const Layout& layout, int pp_rank, const EnginePipeline* pipeline) {
    RankMemory memory;
    memory.pp_rank = pp_rank;
    ItemList items(memory);
    const EngineRank rank = engine_rank(layout, pp_rank, pipeline);
    scheme_items(layout, rank.layout, model_parameter_units_held_at_once(layout.model, rank.part), items);
    switch (layout.model.kind) {
        case ModelKind::gpt: gpt_items(layout, rank.part, items); break;
        case ModelKind::llama: llama_items(layout, rank.part, items); break;
        case ModelKind::mlp: mlp_items(layout, items); break;
    }
    // The tied embedding's gradient, summed between the first and the last stage
    // (train/pipeline/pipeline_executor.cpp), when they are different ranks.
    if (rank.part.active() && layout.model.kind == ModelKind::gpt) {
        bool first = false, last = false;
        for (const LayerRange& chunk : rank.part.chunks) {
            first = first || chunk.first == 0;
            last = last || chunk.end == layout.model.layers;
        }
        if (first != last)
            items.add(MemoryCategory::grads, "tied-embedding gradient scratch", 1,
                      static_cast<double>(rank.layout.units().at(0).numel) * f32, true);
    }
    return memory;
}

double engine_rank_state_bytes(const Layout& layout, int pp_rank) {
    // engine_rank_memory's first items, summed in its order: its total adds only non-negative
    // items after them, so it is never below this (rounding is monotonic).
    RankMemory memory;
    ItemList items(memory);
    const EngineRank rank = engine_rank_unscheduled(layout, pp_rank);
    scheme_items(layout, rank.layout, model_parameter_units_held_at_once(layout.model, rank.part), items);
    return memory.total();
}

RankMemory engine_peak_memory(const Layout& layout) {
    const std::optional<EnginePipeline> pipeline = engine_pipeline(layout);
    const EnginePipeline* shared = pipeline ? &*pipeline : nullptr;
    RankMemory peak = engine_rank_memory(layout, 0, shared);
    for (int r = 1; r < layout.pp; ++r) {
        RankMemory memory = engine_rank_memory(layout, r, shared);
        if (memory.total() > peak.total()) peak = std::move(memory);
    }
    return peak;
}

std::size_t default_bucket_bytes(int zero_stage, std::size_t parameters_per_rank) {
    constexpr std::size_t ddp_bucket = 25u << 20;
    if (zero_stage < 2) return ddp_bucket;
    return std::max<std::size_t>(sizeof(float), std::min(ddp_bucket, parameters_per_rank * sizeof(float) / 4));
}

std::string default_bucket_rule(int zero_stage) {
    if (zero_stage < 2) return "default: 25 MiB (PyTorch DDP's bucket_cap_mb)";
    if (zero_stage == 2)
        return "default for ZeRO-2: min(25 MiB, 1/4 of this rank's fp32 gradients), so the bucket slots stay small "
               "against the model";
    return "default (ZeRO-3 buckets by layer; the bucket is not used)";
}

}  // namespace parbench

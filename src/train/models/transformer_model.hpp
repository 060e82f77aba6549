// What the decoder-only transformers (gpt.cpp, llama.cpp) do alike around their layers, in one
// base class, as Megatron-core's GPTModel keeps the language model's common frame and leaves
// the layers' math to its specs: the sizes and the parameter units a rank holds, the passes
// over a micro-batch or a pipeline chunk (embedding, blocks in a layer range, head), the
// acquire / release / gradients_complete bookkeeping around each block, the vocab-parallel
// cross-entropy, the kept activations (their allocation, the pipeline pool, binding a pass to
// its slot), and the MoE hooks. Each model implements the math of its own embedding, block and
// head (LayerNorm or RMSNorm, GELU or SwiGLU, learned positions or RoPE, one key/value head per
// query head or GQA, a tied or an untied output projection) and its block's buffers.
//
// `Block` is the model's per-layer kept activations (with at least `att`, `residual3` and
// `moe`), `Stash` the output gradients a split backward's B keeps for its W (arXiv 2401.10241
// sec. 2). Units: 0 = the embedding, 1..L = the blocks, then the model's own (Llama's head,
// L + 1) and one unit of routed experts per MoE layer (moe_expert_unit).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/nvtx.hpp"
#include "theory/pipeline/partition.hpp"
#include "theory/rank_traffic.hpp"
#include "theory/transformer_buffers.hpp"
#include "train/model.hpp"
#include "train/models/transformer_parts.hpp"
#include "train/moe/moe_model_state.hpp"
#include "train/ops/sequence_attention.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {

// What the common frame needs to know of a model's own shape.
struct DecoderTraits {
    const char* name;        // "GPT", "Llama": in error messages
    int mlp_width;           // the dense MLP's hidden width (4C for GPT, ffn_hidden for Llama)
    bool tied_head;          // the output projection is the embedding's wte (unit 0), not a unit of its own
    // The frame's buffers (norms, their statistics) follow the model's kind:
    // theory/transformer_buffers.hpp's decoder_frame_shape.
};

// The head's buffers of one micro-batch: the final norm's, the logits' and the loss's parts.
struct HeadActivations {
    float* norm = nullptr;  // (R,C) the final norm's output
    float* mean = nullptr;  // (R) LayerNorm only
    float* rstd = nullptr;  // (R)
    float* logits = nullptr;         // (B,T,V/t)
    float* maxes = nullptr;          // (B,T) each row's max logit over the vocabulary
    float* sums = nullptr;           // (B,T) its sum of exponentials
    float* target_logits = nullptr;  // (B,T) its target's logit
};

// A block's units during its backward: its parameters and gradient buffer, and an MoE layer's
// routed experts (their unit, -1 for a dense layer, and their parameters).
struct BlockUnits {
    const float* params;
    float* grads;
    int experts_unit;
    const float* experts;
};

template <class Block, class Stash>
class TransformerModel : public Model {
  public:
    const ParameterLayout& layout() const override { return layout_; }

    // The embedding, the blocks, the head, then backward in reverse; an MoE layer's routed
    // experts right after its block (theory/rank_traffic.hpp).
    std::vector<int> parameter_use_order() const override { return model_parameter_use_order(config_, part_); }

    void stage_batch(int microbatch, std::uint64_t first_sample) override {
        if (moe_state_) moe_state_->stage(microbatch, first_sample);
        batch_.stage(device_, microbatch, seed_, first_sample, B_, shape_.seq_len, V_,
                     context_ ? positions_host_ : std::vector<int>{});
    }

    void forward(int microbatch, ParameterAccess& access) override {
        pass_.microbatch = microbatch;
        embedding_forward(microbatch, access, /*keep_for_head=*/true);
        for (int l = 0; l < L_; ++l) block_forward(l, access);
        head_forward(microbatch, access);
    }

    void backward(int microbatch, float loss_scale, ParameterAccess& access) override {
        pass_.loss_scale = loss_scale;
        head_backward_then_complete(microbatch, loss_scale, access, /*embedding_follows=*/true);
        for (int l = L_ - 1; l >= 0; --l) block_backward(l, BackwardPass::full, access);
        embedding_backward(microbatch, access);
    }

    // ---- pipeline chunks ----------------------------------------------------------------
    // The rank's chunks run their micro-batches in one pool of kept activations
    // (transformer_parts.hpp); a pass runs with the model's activation pointers bound to its slot.
    std::size_t boundary_numel() const override { return residual_elements(); }

    float* boundary_input(int microbatch, int chunk) override { return slots_.take(microbatch, chunk).input; }

    const float* boundary_output(int microbatch, int chunk) override {
        const LayerRange& range = part_.chunks.at(static_cast<std::size_t>(chunk));
        return slots_.take(microbatch, chunk).blocks[static_cast<std::size_t>(range.end - 1)].residual3;
    }

    // Also after the backward gave the slot back: its d(input) is sent from there.
    float* boundary_gradient(int microbatch, int chunk) override { return slots_.held(microbatch, chunk).gradient; }

    void forward_chunk(int microbatch, int chunk, ParameterAccess& access) override {
        const LayerRange& range = part_.chunks.at(static_cast<std::size_t>(chunk));
        bind(slots_.take(microbatch, chunk), range);
        pass_.microbatch = microbatch;
        // A stage's chunks split the layers, so none holds both ends: the head, on the last
        // stage, acquires its unit again (GPT's tied embedding unit too; plan/rank_traffic.hpp
        // counts it so).
        if (range.first == 0) embedding_forward(microbatch, access, /*keep_for_head=*/false);
        for (int l = range.first; l < range.end; ++l) block_forward(l, access);
        if (range.end == L_) {
            head_forward(microbatch, access);
            access.release(unit(head_unit()));  // the backward acquires it again: other passes run between
            pass_.head_params = nullptr;
        }
    }

    void backward_chunk(int microbatch, int chunk, float loss_scale, BackwardPass pass,
                        ParameterAccess& access) override {
        const LayerRange& range = part_.chunks.at(static_cast<std::size_t>(chunk));
        ActivationSlot& s = slots_.held(microbatch, chunk);
        bind(s, range);
        pass_.loss_scale = loss_scale;
        if (pass == BackwardPass::weight) {
            for (int l = range.end - 1; l >= range.first; --l) block_weights(l, access);
        } else {
            if (range.end == L_)
                head_backward_then_complete(microbatch, loss_scale, access,
                                            /*embedding_follows=*/range.first == 0 || holds_first_stage_);
            for (int l = range.end - 1; l >= range.first; --l) block_backward(l, pass, access);
            if (range.first == 0) embedding_backward(microbatch, access);
        }
        if (pass != BackwardPass::input) slots_.give_back(s);
    }

    // GPT's tied embedding, on a rank that holds the first stage or the last but not both.
    int shared_unit() const override {
        return traits_.tied_head && part_.active() && holds_first_stage_ != holds_last_stage_ ? unit(0) : -1;
    }
    bool computes_loss() const override { return !part_.active() || holds_last_stage_; }

    std::size_t activation_bytes_per_layer() const override { return layer_activation_bytes_; }
    ContextAttention* context_attention() override { return context_.get(); }
    std::size_t context_workspace_bytes() const override { return context_workspace_bytes_; }

    double mean_loss(int microbatch) const override { return batch_.mean_loss(device_, microbatch); }

    // ---- mixture of experts ---------------------------------------------------------------
    double auxiliary_loss(int microbatch) const override {
        return moe_state_ ? moe_state_->auxiliary_loss(microbatch) : 0.0;
    }
    MoeMemory moe_memory() const override {
        if (!moe_layer_) return {};
        return MoeMemory{moe_kept_bytes_, moe_scratch_bytes_, moe_layer_->shape()};
    }
    std::vector<int> moe_layers() const override { return moe_state_ ? moe_state_->layers() : std::vector<int>{}; }
    std::vector<MoeLayerStats> finish_step() override {
        return moe_state_ ? moe_state_->finish_step() : std::vector<MoeLayerStats>{};
    }

    // --moe-a2a-overlap-1f1b: while this pass waits on an exchange, on_post runs the partner
    // pass, which binds its own slot and sets the running pass's fields; they are put back after.
    void set_moe_exchange_switch(std::function<void()> on_post) override {
        if (!moe_layer_) return;
        if (!on_post) return moe_layer_->set_exchange_switch({});
        moe_layer_->set_exchange_switch([this, on_post = std::move(on_post)] {
            const RunningPass paused = pass_;
            on_post();
            if (paused.slot != nullptr) bind(*paused.slot, paused.range);
            pass_ = paused;
        });
    }

  protected:
    using KeptPool = KeptActivations<Block, Stash, HeadActivations>;
    // One micro-batch's activations of one chunk: blocks indexed by layer (only the chunk's
    // are set), the head's on the last stage, and the boundary buffers.
    using ActivationSlot = typename KeptPool::Slot;

    // What the pass now running on this model has set: the fields its layers read besides the
    // bound activations. One value, so an MoE exchange switch can put it back whole.
    struct RunningPass {
        const ActivationSlot* slot = nullptr;  // what bind() bound last (pipeline only)
        LayerRange range;                      // and for which layers
        int microbatch = 0;                    // the running forward's
        bool recomputing = false;              // a full-recompute forward: counts nothing
        float loss_scale = 0.0f;               // the running backward's
        const float* head_params = nullptr;    // the head's unit, acquired by forward, released by backward
    };

    // Sizes and shared state only: the model's constructor then builds its layout
    // (select_units), its attention (make_attention), its MoE layer (make_moe_layer) and its
    // activations (allocate_activations), in that order.
    TransformerModel(const DecoderTraits& traits, const ModelConfig& config, const MicrobatchShape& shape,
                     std::uint64_t seed, Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp,
                     const PipelinePart& part, Recompute recompute, const ContextGroup& cp, const MoeContext& moe)
        : traits_(traits), recompute_(recompute), moe_context_(moe), config_(config), shape_(shape), seed_(seed),
          ops_(ops), device_(ledger.device()), ledger_(ledger), arena_(ledger), tp_(tp), part_(part),
          B_(shape.batch), T_(shape.seq_len / cp.split.size), C_(config.hidden), NH_(config.heads), V_(config.vocab),
          L_(config.layers), R_(tp.local_rows(shape.batch * (shape.seq_len / cp.split.size))),
          Cl_(config.hidden / tp.size()), NHl_(config.heads / tp.size()), Fl_(traits.mlp_width / tp.size()),
          vocab_{tp.rank() * (config.vocab / tp.size()), config.vocab / tp.size()} {}

    // ---- the model's own math -------------------------------------------------------------
    // `keep_for_head`: the same pass runs the head next (GPT leaves its tied unit 0 acquired).
    virtual void embedding_forward(int microbatch, ParameterAccess& access, bool keep_for_head) = 0;
    // The layer's forward with its parameters `p` (and `e`, an MoE layer's routed experts): in
    // forward, and again in backward under full recompute (into the shared buffers, from the
    // kept layer input).
    virtual void block_forward_compute(int l, const float* p, const float* e) = 0;
    // Leaves the head's unit acquired in pass_.head_params, for the backward (the final norm,
    // the logits and cross_entropy_forward).
    virtual void head_forward(int microbatch, ParameterAccess& access) = 0;
    // From cross_entropy_backward to d(last block's output) in dresidual_; ends with the head's
    // unit released and pass_.head_params null.
    virtual void head_backward(int microbatch, float loss_scale, ParameterAccess& access) = 0;
    // dresidual_ holds d(block output) on entry, d(block input) on return. `defer`: the input
    // pass of a split backward, which leaves the weight gradients of the dense matmuls to
    // block_weights_compute, their output gradients in the stash.
    virtual void block_backward_compute(int l, const BlockUnits& u, bool defer, ParameterAccess& access) = 0;
    virtual void block_weights_compute(int l, const float* p, float* g) = 0;
    virtual void embedding_backward(int microbatch, ParameterAccess& access) = 0;
    // Every buffer of a layer (the probabilities too when `with_probabilities`), with a dense
    // MLP's and/or an MoE MLP's (allocate_moe_activations).
    virtual Block allocate_block_buffers(bool with_probabilities, bool dense_mlp, bool moe_mlp) = 0;
    virtual Stash allocate_stash() = 0;
    // The model's own backward scratch, reused by every block.
    virtual void allocate_block_scratch() = 0;

    // ---- construction -----------------------------------------------------------------------
    // Under expert parallelism the layout holds this rank's E/ep routed experts; under --etp
    // each routed expert's slice of this tp rank (theory/expert_parallel.hpp).
    static ExpertSplit expert_split(const MoeContext& moe) {
        ExpertSplit experts;
        if (moe.expert_group) experts = ExpertSplit{moe.expert_group->rank(), moe.expert_group->size()};
        if (moe.expert_tensor_group) {
            experts.tensor_rank = moe.expert_tensor_group->rank();
            experts.tensor_size = moe.expert_tensor_group->size();
        }
        return experts;
    }

    // The units this rank holds (all, or its pipeline stages'), once full_layout_ is built.
    void select_units() {
        local_unit_.assign(full_layout_.units().size(), -1);
        std::vector<int> units;
        if (part_.active()) {
            units = pipeline_part_units(config_, part_);
        } else {
            for (int u = 0; u < static_cast<int>(full_layout_.units().size()); ++u) units.push_back(u);
        }
        for (std::size_t i = 0; i < units.size(); ++i)
            local_unit_[static_cast<std::size_t>(units[i])] = static_cast<int>(i);
        layout_ = part_.active() ? full_layout_.select_units(units) : full_layout_;
    }

    // The attention core of shape `gqa`: SequenceAttention's block kernels over the whole
    // sequence (flash, without context parallelism; q and k/v rows `q_pitch` and `kv_pitch`
    // floats apart), ContextAttention's under context parallelism, else the naive one.
    void make_attention(const ContextGroup& cp, AttentionKind attention, const GqaShape& gqa, int q_pitch,
                        int kv_pitch) {
        gqa_ = gqa;
        if (!cp.active() && attention == AttentionKind::flash) sequence_.emplace(gqa_, q_pitch, kv_pitch);
        if (cp.active()) {
            const std::size_t before = ledger_.usage().live_of(MemoryCategory::activations);
            context_ = std::make_unique<ContextAttention>(*cp.comm, ops_, ledger_, cp.split, gqa_, shape_.seq_len);
            context_workspace_bytes_ = ledger_.usage().live_of(MemoryCategory::activations) - before;
        }
    }

    // One routing group per micro-batch and rank: its R rows (B·T/t under SP: each tp rank
    // routes its own, the layer's parameter gradients summed over tp by moe_pack_).
    void make_moe_layer(Matmuls& matmuls) {
        const MoeMemoryShape moe_shape = model_moe_shape(config_, R_, moe_context_);
        const std::size_t before = ledger_.usage().live_of(MemoryCategory::activations);
        moe_layer_ = std::make_unique<MoeLayer>(moe_shape, config_.moe->score, moe_context_.settings, ops_, arena_,
                                                moe_context_.expert_group, moe_context_.expert_tensor_group,
                                                &matmuls);
        moe_scratch_bytes_ = ledger_.usage().live_of(MemoryCategory::activations) - before;
        std::vector<int> held;
        for (int l = 0; l < L_; ++l)
            if (is_moe(l) && local_unit_[static_cast<std::size_t>(l + 1)] >= 0) held.push_back(l);
        moe_state_.emplace(config_, moe_context_, shape_.microbatches, held, device_);
    }

    // The block's matmuls, then the logits' where this rank computes the head and the routed
    // experts'; they size the bf16 operand copies (train/matmuls.hpp).
    // (theory/transformer_buffers.hpp's decoder_matmul_shapes, which the memory theory sums.)
    std::vector<MatmulShape> matmul_shapes(std::vector<MatmulShape> block) const {
        const bool head = !part_.active() || std::any_of(part_.chunks.begin(), part_.chunks.end(),
                                                         [&](const LayerRange& r) { return r.end == L_; });
        std::optional<MoeMemoryShape> moe;
        if (config_.moe) moe = model_moe_shape(config_, R_, moe_context_);
        return decoder_matmul_shapes(std::move(block), config_, tp_.size(), rows(), head, moe ? &*moe : nullptr);
    }

    // The frame's buffers from the table the memory theory sums (theory/transformer_buffers.hpp).
    DecoderFrameBuffers frame_buffers() const {
        return decoder_frame_buffers(decoder_frame_shape(config_, tp_.size(), tp_.sequence_parallel(),
                                                         static_cast<std::size_t>(B_), static_cast<std::size_t>(T_),
                                                         keeps_probabilities(), recompute_ == Recompute::selective));
    }

    void allocate_activations() {
        const DecoderFrameBuffers frame = frame_buffers();
        batch_.allocate(arena_, shape_.microbatches, frame.microbatch);
        if (recompute_ == Recompute::full)
            recompute_work_ = allocate_block_buffers(true, config_.moe_layer_count() < L_, config_.moe_layer_count() > 0);
        if (frame.shared_probabilities > 0) recompute_work_.att = arena_.floats(frame.shared_probabilities);
        if (part_.active()) {
            allocate_slots(frame);
        } else {
            encoded_ = arena_.floats(frame.boundary_input);
            for (int l = 0; l < L_; ++l) blocks_.push_back(allocate_block(l));
            head_ = allocate_head(frame.head);
            // Backward's running gradient; a pipeline chunk's lives in its slot.
            dresidual_ = arena_.floats(frame.boundary_gradient);
        }
        preatt_ = arena_.floats_or_null(frame.preatt);
        if (sequence_) sequence_workspace_ = arena_.floats(sequence_->workspace_floats(ops_));
        projection_ = arena_.floats(frame.projection);
        dlosses_ = arena_.floats(frame.dlosses);
        dlogits_ = arena_.floats(frame.dlogits);
        dnormed_ = arena_.floats(frame.dnormed);
        dwide_ = arena_.floats(frame.dwide);
        allocate_block_scratch();
        dpreatt_ = arena_.floats_or_null(frame.dpreatt);
        datt_ = arena_.floats_or_null(frame.datt);
        norms_.allocate(arena_, frame.norm_pack);
        if (moe_layer_) moe_pack_.allocate(arena_, moe_layer_->shape());
        gathered_ = arena_.floats_or_null(frame.gathered);
        dgathered_ = arena_.floats_or_null(frame.dgathered);
        projection_local_ = arena_.floats_or_null(frame.projection_local);
        dnormed_local_ = arena_.floats_or_null(frame.dnormed_local);
    }

    // An MoE layer's kept buffers, in place of the dense MLP's (what one takes is moe.memory).
    MoeActivations allocate_moe_activations() {
        const std::size_t before = ledger_.usage().live_of(MemoryCategory::activations);
        MoeActivations moe = moe_layer_->allocate_activations(arena_);
        moe_kept_bytes_ = ledger_.usage().live_of(MemoryCategory::activations) - before;
        return moe;
    }

    // ---- the passes' common steps -----------------------------------------------------------
    bool is_moe(int l) const { return config_.moe && config_.moe->is_moe_layer(l); }
    int head_unit() const { return traits_.tied_head ? 0 : L_ + 1; }

    int unit(int global_unit) const {
        const int local = local_unit_.at(static_cast<std::size_t>(global_unit));
        if (local < 0)
            throw std::logic_error(std::string(traits_.name) + ": unit " + std::to_string(global_unit) +
                                   " is not on this stage");
        return local;
    }

    void block_forward(int l, ParameterAccess& access) {
        NvtxRange range(numbered_range_name("h", l, " forward"));
        const float* p = access.acquire(unit(l + 1));
        const float* e = is_moe(l) ? access.acquire(unit(moe_expert_unit(config_, l))) : nullptr;
        block_forward_compute(l, p, e);
        if (is_moe(l)) access.release(unit(moe_expert_unit(config_, l)));
        access.release(unit(l + 1));
    }

    // BackwardPass::input leaves the dense matmuls' weight gradients to block_weights: their
    // output gradients go to the slot's stash (their inputs are kept activations already); the
    // norms' small gradients are taken at once.
    void block_backward(int l, BackwardPass pass, ParameterAccess& access) {
        NvtxRange range(numbered_range_name("h", l, pass == BackwardPass::input ? " backward (B)" : " backward"));
        // An MoE layer defers nothing: its input pass computes its weight gradients too (the
        // router's and experts' come out of the MoE layer's backward with its input gradient).
        const bool defer = pass == BackwardPass::input && !is_moe(l);
        const float* p = access.acquire(unit(l + 1));
        float* g = access.gradients(unit(l + 1));
        const int experts_unit = is_moe(l) ? unit(moe_expert_unit(config_, l)) : -1;
        const float* e = experts_unit >= 0 ? access.acquire(experts_unit) : nullptr;
        if (recompute_ == Recompute::full) {
            NvtxRange recompute_range(numbered_range_name("h", l, " recompute"));
            pass_.recomputing = true;
            block_forward_compute(l, p, e);
            pass_.recomputing = false;
        }
        block_backward_compute(l, BlockUnits{p, g, experts_unit, e}, defer, access);
        if (experts_unit >= 0) {
            access.release(experts_unit);
            access.gradients_complete(experts_unit);
        }
        access.release(unit(l + 1));
        if (!defer) access.gradients_complete(unit(l + 1));
    }

    // W of a split backward: the weight gradients block_backward(input) left, from the stashed
    // output gradients and the kept inputs. Sequence parallelism is refused with zero-bubble
    // schedules (train_options.cpp), so the inputs need no gather here.
    void block_weights(int l, ParameterAccess& access) {
        if (is_moe(l)) return;  // its input pass took every weight gradient
        NvtxRange range(numbered_range_name("h", l, " weight gradients (W)"));
        const float* p = access.acquire(unit(l + 1));
        float* g = access.gradients(unit(l + 1));
        block_weights_compute(l, p, g);
        access.release(unit(l + 1));
        access.gradients_complete(unit(l + 1));
    }

    // The head's backward; the gradient of its unit is then complete, unless that is GPT's tied
    // embedding and this rank's embedding backward still adds to it (`embedding_follows`).
    void head_backward_then_complete(int microbatch, float loss_scale, ParameterAccess& access,
                                     bool embedding_follows) {
        head_backward(microbatch, loss_scale, access);
        if (!traits_.tied_head || !embedding_follows) access.gradients_complete(unit(head_unit()));
    }

    // An MoE layer's MLP (its block tensors `w`, routed experts `e`) on this rank's R rows of the
    // normed `x` (all of them without SP: no gather, no reduction), into projection_.
    template <class BlockTensors>
    void moe_mlp_forward(int l, const float* p, const float* e, const BlockTensors& w, const MoeActivations& a,
                         const float* x) {
        moe_state_->forward(*moe_layer_, l, pass_.microbatch, pass_.recomputing, projection_, a, x,
                            moe_weights(full_layout_, p, e, w));
    }

    // Its backward on the same rows: d(x) into dnormed_ from d(output) in dresidual_, as they are.
    template <class BlockTensors>
    void moe_mlp_backward(int l, const BlockUnits& u, const BlockTensors& w, const MoeActivations& a, const float* x,
                          ParameterAccess& access) {
        ops_.fill(dnormed_, 0.0f, residual_elements());
        moe_state_->backward(*moe_layer_, moe_pack_, l, dnormed_,
                             moe_gradients(full_layout_, u.grads, access.gradients(u.experts_unit), w), dresidual_, a,
                             x, moe_weights(full_layout_, u.params, u.experts, w), R_, pass_.loss_scale);
    }

    // Vocab-parallel cross-entropy (Megatron-LM sec. 3) from head_.logits: the logits stay
    // split; the loss needs only each row's max, sum of exponentials and target logit over the
    // group, three all-reduces of B·T floats.
    void cross_entropy_forward(int microbatch) {
        const int BT = B_ * T_;
        const int* targets = batch_.targets(microbatch);
        ops_.row_max(head_.maxes, head_.logits, BT, vocab_.size);
        tp_.allreduce_max(head_.maxes, rows());
        ops_.row_sum_exp(head_.sums, head_.logits, head_.maxes, BT, vocab_.size);
        tp_.allreduce_sum(head_.sums, rows());
        ops_.target_logit(head_.target_logits, head_.logits, targets, BT, vocab_.size, vocab_);
        tp_.allreduce_sum(head_.target_logits, rows());
        ops_.crossentropy_losses_from_parts(batch_.losses(microbatch), head_.maxes, head_.sums, head_.target_logits,
                                            BT);
    }

    // d(logits) into dlogits_, each row's loss weighing `loss_scale` in the step loss.
    void cross_entropy_backward(int microbatch, float loss_scale) {
        ops_.fill(dlosses_, loss_scale, rows());
        ops_.crossentropy_shard_backward_overwrite(dlogits_, dlosses_, head_.logits, head_.maxes, head_.sums,
                                                   batch_.targets(microbatch), B_ * T_, vocab_.size, vocab_);
    }

    void bind(const ActivationSlot& s, const LayerRange& range) {
        pass_.slot = &s;
        pass_.range = range;
        first_layer_ = range.first;
        encoded_ = s.input;
        blocks_ = s.blocks;
        stash_ = s.stash;
        dresidual_ = s.gradient;
        if (range.end == L_) head_ = s.head;
    }

    std::size_t rows() const { return static_cast<std::size_t>(B_) * static_cast<std::size_t>(T_); }
    // Elements of a norm / residual region activation on this rank: (R,C).
    std::size_t residual_elements() const { return static_cast<std::size_t>(R_) * static_cast<std::size_t>(C_); }
    // The standard attention: its probabilities (B,NHl,T,T) are what a layer keeps, and what
    // selective recompute shares between layers.
    bool keeps_probabilities() const { return !context_ && !sequence_; }
    // What a layer keeps of its attention core: the probabilities, or ContextAttention's or
    // SequenceAttention's state.
    std::size_t attention_store_elements() const {
        return context_ ? context_->saved_floats() : sequence_ ? sequence_->saved_floats() : gqa_.score_elements();
    }
    const float* param(const float* unit_base, int tensor) const {
        return unit_base + full_layout_.tensor(tensor).offset_in_unit;
    }
    float* grad(float* unit_base, int tensor) const { return unit_base + full_layout_.tensor(tensor).offset_in_unit; }
    const float* block_input(int l) const {
        return l == first_layer_ ? encoded_ : blocks_[static_cast<std::size_t>(l - 1)].residual3;
    }
    const float* last_residual() const { return blocks_.back().residual3; }

    DecoderTraits traits_;
    Recompute recompute_;
    MoeContext moe_context_;
    ModelConfig config_;
    MicrobatchShape shape_;
    std::uint64_t seed_;
    Ops& ops_;
    Device& device_;
    MemoryLedger& ledger_;
    ActivationArena arena_;
    TensorParallelGroup tp_;
    PipelinePart part_;
    int B_, T_, C_, NH_, V_, L_;
    int R_;              // rows of the norm / residual regions on this rank: B·T, or B·T/t under SP
    int Cl_, NHl_, Fl_;  // this rank's query channels, query heads and MLP width
    VocabShard vocab_;   // this rank's rows of the embedding and columns of the logits
    GqaShape gqa_;       // the attention core's (GPT's: one key/value head per query head)
    std::size_t layer_activation_bytes_ = 0;
    ParameterLayout full_layout_;  // the whole model's tensors (tensor ids index it)
    ParameterLayout layout_;       // the units this rank holds: all, or its pipeline stages'
    std::vector<int> local_unit_;  // global unit -> index in layout_, or -1
    bool holds_first_stage_ = false, holds_last_stage_ = false;

    std::unique_ptr<MoeLayer> moe_layer_;     // null without MoE layers
    std::optional<MoeModelState> moe_state_;  // the MoE layers this rank holds (null without)
    std::size_t moe_scratch_bytes_ = 0;       // what the MoE layer took from the ledger
    std::size_t moe_kept_bytes_ = 0;          // what one MoE layer's kept buffers took

    std::unique_ptr<ContextAttention> context_;  // context parallelism only
    // Block attention over the whole sequence (no context parallelism), and its workspace.
    std::optional<SequenceAttention> sequence_;
    float* sequence_workspace_ = nullptr;
    std::size_t context_workspace_bytes_ = 0;
    std::vector<int> positions_host_;  // (T) each held token's position in its sequence (Llama's, or under cp)

    RunningPass pass_;
    KeptPool slots_{traits_.name, {}, {}};  // the rank's chunks' (pipeline only)
    int first_layer_ = 0;                   // of the chunk being run
    MicrobatchTokens batch_;
    Block recompute_work_{};  // full: one layer's buffers; selective: .att only
    float* encoded_ = nullptr;
    std::vector<Block> blocks_;
    std::vector<Stash> stash_;  // bound from a slot (split backward only)
    HeadActivations head_;
    float *preatt_ = nullptr, *projection_ = nullptr;
    // Sequence parallelism only (nullptr otherwise).
    float *gathered_ = nullptr, *dgathered_ = nullptr, *projection_local_ = nullptr, *dnormed_local_ = nullptr;
    NormGradientPack norms_{ops_, tp_, C_};  // the norms' partial sums under SP
    MoeGradientPack moe_pack_{ops_, tp_};    // the MoE layers' partial sums under SP
    float *dlosses_ = nullptr, *dlogits_ = nullptr, *dnormed_ = nullptr, *dresidual_ = nullptr, *dwide_ = nullptr;
    float *dpreatt_ = nullptr, *datt_ = nullptr;

  private:
    // One layer's activations. Under full recompute only its output (the next layer's input)
    // is the layer's own, the rest is the shared set every layer's recompute overwrites; under
    // selective recompute the attention probabilities are shared. Counted per layer: what is
    // the layer's own.
    Block allocate_block(int l) {
        const std::size_t before = ledger_.usage().live_of(MemoryCategory::activations);
        Block a{};
        if (recompute_ == Recompute::full) {
            a = recompute_work_;
            a.residual3 = arena_.floats(residual_elements());
        } else {
            // Context-parallel and block attention keep only their small saved state, which
            // backward needs whatever the recompute: selective shares nothing then.
            const bool shared_probabilities = recompute_ == Recompute::selective && keeps_probabilities();
            a = allocate_block_buffers(!shared_probabilities, !is_moe(l), is_moe(l));
            if (shared_probabilities) a.att = recompute_work_.att;
        }
        // A dense layer's (the formula's) when the model has one; an MoE layer's otherwise
        // (what it keeps in place of the MLP's is the report's moe.memory).
        if (!is_moe(l) || config_.moe_layer_count() == L_)
            layer_activation_bytes_ = ledger_.usage().live_of(MemoryCategory::activations) - before;
        return a;
    }

    HeadActivations allocate_head(const DecoderHeadBuffers& sizes) {
        HeadActivations head;
        head.norm = arena_.floats(sizes.norm);
        head.mean = arena_.floats_or_null(sizes.mean);
        head.rstd = arena_.floats(sizes.rstd);
        head.logits = arena_.floats(sizes.logits);
        head.maxes = arena_.floats(sizes.maxes);
        head.sums = arena_.floats(sizes.sums);
        head.target_logits = arena_.floats(sizes.target_logits);
        return head;
    }

    // The rank's pool (theory/pipeline/partition.hpp's activation_pool, what plan counts): layer
    // stores of each kind (dense, MoE) apart.
    void allocate_slots(const DecoderFrameBuffers& frame) {
        for (const LayerRange& range : part_.chunks) {
            holds_first_stage_ = holds_first_stage_ || range.first == 0;
            holds_last_stage_ = holds_last_stage_ || range.end == L_;
        }
        const std::vector<int> kinds = transformer_layer_store_kinds(config_, recompute_);
        const ActivationPool pool = activation_pool(part_, kinds);
        slots_ = KeptPool(traits_.name, part_.chunks, kinds);
        for (int i = 0; i < pool.slots; ++i)
            slots_.add_slot(arena_.floats(frame.boundary_input), arena_.floats(frame.boundary_gradient));
        for (std::size_t kind = 0; kind < pool.layer_stores.size(); ++kind) {
            const int layer = layer_for_store_kind(config_, kinds, static_cast<int>(kind));
            for (int i = 0; i < pool.layer_stores[kind]; ++i) {
                const Block block = allocate_block(layer);
                // An MoE layer defers nothing to W: its stores have no stash (zb-h1 refuses full
                // recompute, so the MoE layers' kind is their own there).
                slots_.add_store(static_cast<int>(kind), block,
                                 part_.split_backward && !is_moe(layer) ? allocate_stash() : Stash{});
            }
        }
        for (int i = 0; i < pool.heads; ++i) slots_.add_head(allocate_head(frame.head));
    }
};

}  // namespace parbench

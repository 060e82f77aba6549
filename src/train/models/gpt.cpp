// Tensor parallelism (tensor_parallel.hpp) splits each block Megatron's way: QKV by heads
// and the MLP's first linear by output features (column-parallel), the attention and MLP
// output projections by input features (row-parallel), the tied embedding and logits by
// vocabulary (vocab-parallel cross-entropy: no gather of the logits). LayerNorms, the
// position embedding and the row-parallel biases are held whole by every rank; a whole
// term is added by group rank 0 alone before the partial sums are reduced, so it counts
// once. Their gradients are the same on every rank without SP: each rank sees every token
// and, through the all-reduces, the same output gradients (MPI's and NCCL's all-reduce
// hand every rank the same sum), so the replicas stay bitwise identical, which
// assemble_full_parameters checks. Under SP a LayerNorm sees 1/t of the tokens, so its
// gradients are partial sums and are all-reduced over the group (arXiv 2205.05198 sec.
// 4.2.2); the row-parallel biases' gradients come from the all-gathered output gradient and
// stay whole. There is no dropout: the model trains deterministically.
//
// Context parallelism (--cp, train/context/context_attention.hpp): the model holds T/c tokens
// of every sequence, those of context_positions(), in that order. The position embedding adds
// each token's own row of wpe (gathered into a (T/c, C) copy in at most two contiguous runs,
// the zigzag's two chunks, whose gradient is scattered back the same way). The fused QKV
// becomes three matmuls on the row slices [q | k | v] of the local weight, so Q, K and V lie
// apart in the qkv buffer (B,T,Cl each), as ContextAttention takes them; attention is
// ContextAttention's, which keeps only its `saved` state per layer (no probabilities: selective
// recompute has nothing more to drop). Everything else acts per token, unchanged.
//
// Block attention (theory/engine_attention.hpp chooses flash: --attention, or auto from 256
// tokens on a backend whose block kernels tile): without context parallelism the whole
// sequence's attention is SequenceAttention's (train/ops/sequence_attention.hpp), reading q, k
// and v in place inside the fused qkv rows (pitch 3Cl) and keeping the log-sum-exp of each
// query row in `att` instead of the probabilities (selective recompute then has nothing to
// drop either).
//
// Mixture of experts (a config's "moe"), as in llama.cpp: in its MoE layers the MLP is an
// MoeLayer over the block's rows (GELU experts by default, GPT's MLP form without biases, as
// Megatron-core's grouped experts), one routing group per micro-batch, the router and shared
// experts in the block's unit and the routed experts in a unit of their own (moe_expert_unit).
// Under tensor parallelism every tp rank holds the MoE tensors whole: without SP it runs the
// layer on the same rows, so it skips the MLP's tp_.leave and tp_.enter_backward; under SP on
// its own R = B·T/t rows (no gather or reduce-scatter either), its parameters' partial
// gradients summed over tp (MoeGradientPack).
#include "train/models/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/nvtx.hpp"
#include "theory/pipeline/partition.hpp"
#include "theory/rank_traffic.hpp"
#include "train/models/transformer_parts.hpp"
#include "train/moe/moe_model_state.hpp"
#include "train/ops/sequence_attention.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {
namespace {

using gpt_layout::BlockTensors;
using gpt_layout::EmbeddingTensors;
using GptTensors = gpt_layout::Tensors;

// A split backward's B keeps, per block, the output gradients of the four matmuls whose
// weight gradients W computes later (arXiv 2401.10241 sec. 2): (B,T,C), (B,T,4C/t),
// (B,T,C), (B,T,3C/t).
struct WeightGradientStash {
    float* dmlp;
    float* dfc;
    float* dattention;
    float* dqkv;
};

// What one block keeps from forward for backward. R = B·T rows, or B·T/t under SP (the
// LayerNorm and residual regions); Cl = C/t, NHl = NH/t: this rank's channels and heads.
struct BlockActivations {
    float* ln1;       // (R,C)
    float* ln1_mean;  // (R)
    float* ln1_rstd;  // (R)
    float* qkv;       // (B,T,3Cl); under context parallelism q, k, v apart: 3 x (B,T,Cl)
    float* atty;      // (B,T,Cl)
    float* att;       // (B,NHl,T,T); ContextAttention's or SequenceAttention's saved state
    float* residual2; // (R,C)
    float* ln2;
    float* ln2_mean;
    float* ln2_rstd;
    float* fch;       // (B,T,4C/t)
    float* fch_gelu;  // (B,T,4C/t)
    float* residual3; // (R,C)
    MoeActivations moe;  // an MoE layer's, in place of fch and fch_gelu
};

class GptModel : public Model {
  public:
    GptModel(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed, Ops& ops,
             MemoryLedger& ledger, const TensorParallelGroup& tp, const PipelinePart& part, Precision precision,
             Recompute recompute, const ContextGroup& cp, const MoeContext& moe, AttentionKind attention)
        : recompute_(recompute), moe_context_(moe), config_(config), shape_(shape), seed_(seed), ops_(ops), device_(ledger.device()), ledger_(ledger),
          arena_(ledger), tp_(tp), context_split_(cp.split), B_(shape.batch), T_(shape.seq_len / cp.split.size),
          C_(config.hidden), NH_(config.heads), V_(config.vocab), L_(config.layers),
          R_(tp.local_rows(shape.batch * (shape.seq_len / cp.split.size))),
          Cl_(config.hidden / tp.size()), NHl_(config.heads / tp.size()), Fl_(4 * config.hidden / tp.size()),
          vocab_{tp.rank() * (config.vocab / tp.size()), config.vocab / tp.size()},
          matmuls_(ops, precision, ledger, matmul_shapes(part)) {
        part_ = part;
        // Under expert parallelism the layout holds this rank's E/ep routed experts.
        ExpertSplit experts;
        if (moe.expert_group) experts = ExpertSplit{moe.expert_group->rank(), moe.expert_group->size()};
        // Under --etp each routed expert's slice of this tp rank (theory/expert_parallel.hpp).
        if (moe.expert_tensor_group) {
            experts.tensor_rank = moe.expert_tensor_group->rank();
            experts.tensor_size = moe.expert_tensor_group->size();
        }
        tensors_ = gpt_layout::build(config, shape.seq_len, tp.split(), full_layout_, experts);
        local_unit_.assign(full_layout_.units().size(), -1);
        std::vector<int> units;
        if (part.active()) {
            units = pipeline_part_units(config, part);
        } else {
            for (int u = 0; u < static_cast<int>(full_layout_.units().size()); ++u) units.push_back(u);
        }
        for (std::size_t i = 0; i < units.size(); ++i) local_unit_[static_cast<std::size_t>(units[i])] = static_cast<int>(i);
        layout_ = part.active() ? full_layout_.select_units(units) : full_layout_;
        if (!cp.active() && attention == AttentionKind::flash)
            sequence_.emplace(GqaShape{B_, T_, NHl_, NHl_, C_ / NH_, 0, 1}, 3 * Cl_, 3 * Cl_);
        if (cp.active()) {
            const int hs = C_ / NH_;
            const std::size_t before = ledger.usage().live_of(MemoryCategory::activations);
            context_ = std::make_unique<ContextAttention>(*cp.comm, ops, ledger, cp.split,
                                                          GqaShape{B_, T_, NHl_, NHl_, hs, 0, 1}, shape.seq_len);
            context_workspace_bytes_ = ledger.usage().live_of(MemoryCategory::activations) - before;
            positions_host_ = context_positions(shape.seq_len, cp.split);
            // Contiguous runs of positions (one per chunk): wpe rows are gathered by run.
            for (int i = 0; i < T_; ++i) {
                const int position = positions_host_[static_cast<std::size_t>(i)];
                if (position_runs_.empty() || position_runs_.back().first + position_runs_.back().length != position)
                    position_runs_.push_back(PositionRun{position, 0, i});
                ++position_runs_.back().length;
            }
        }
        if (config.moe) {
            // One routing group per micro-batch and rank: its R rows (B·T/t under SP: each tp rank
            // routes its own, the layer's parameter gradients summed over tp by moe_pack_).
            const MoeMemoryShape moe_shape = model_moe_shape(config, R_, moe);
            const std::size_t before = ledger.usage().live_of(MemoryCategory::activations);
            moe_layer_ =
                std::make_unique<MoeLayer>(moe_shape, config.moe->score, moe.settings, ops, arena_, moe.expert_group,
                                           moe.expert_tensor_group,
                                           &matmuls_);
            moe_scratch_bytes_ = ledger.usage().live_of(MemoryCategory::activations) - before;
            std::vector<int> held;
            for (int l = 0; l < L_; ++l)
                if (is_moe(l) && local_unit_[static_cast<std::size_t>(l + 1)] >= 0) held.push_back(l);
            moe_state_.emplace(config, moe, shape.microbatches, held, device_);
        }
        allocate_activations();
    }

    const ParameterLayout& layout() const override { return layout_; }

    // The embedding unit, acquired by the encoder, stays held through the blocks for the tied
    // head and into backward: one gather per step, as FSDP's root unit; an MoE layer's routed
    // experts right after its block (theory/rank_traffic.hpp).
    std::vector<int> parameter_use_order() const override { return model_parameter_use_order(config_, part_); }

    // The held embedding and the block being computed (a pipeline stage holds one at a time).
    int parameter_units_held_at_once() const override { return part_.active() ? 1 : 2; }

    void stage_batch(int microbatch, std::uint64_t first_sample) override {
        batch_.stage(device_, microbatch, seed_, first_sample, B_, shape_.seq_len, V_, positions_host_);
    }

    void forward(int microbatch, ParameterAccess& access) override {
        microbatch_ = microbatch;
        embedding_forward(microbatch, access, /*keep_for_head=*/true);
        for (int l = 0; l < L_; ++l) block_forward(l, access);
        head_forward(microbatch, access);
    }

    void backward(int microbatch, float loss_scale, ParameterAccess& access) override {
        loss_scale_ = loss_scale;
        head_backward(microbatch, loss_scale, access);
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
        microbatch_ = microbatch;
        // A stage's chunks split the layers, so none holds both ends: the head, on the last
        // stage, acquires the embedding unit again (plan/rank_traffic.hpp counts it so).
        if (range.first == 0) embedding_forward(microbatch, access, /*keep_for_head=*/false);
        for (int l = range.first; l < range.end; ++l) block_forward(l, access);
        if (range.end == L_) {
            head_forward(microbatch, access);
            access.release(unit(0));  // the backward acquires it again: other passes run between
            head_params_ = nullptr;
        }
    }

    void backward_chunk(int microbatch, int chunk, float loss_scale, BackwardPass pass,
                        ParameterAccess& access) override {
        const LayerRange& range = part_.chunks.at(static_cast<std::size_t>(chunk));
        ActivationSlot& s = slots_.held(microbatch, chunk);
        bind(s, range);
        loss_scale_ = loss_scale;
        if (pass == BackwardPass::weight) {
            for (int l = range.end - 1; l >= range.first; --l) block_weights(l, access);
        } else {
            if (range.end == L_) {
                head_backward(microbatch, loss_scale, access);
                if (range.first != 0 && !holds_first_stage_) access.gradients_complete(unit(0));
            }
            for (int l = range.end - 1; l >= range.first; --l) block_backward(l, pass, access);
            if (range.first == 0) embedding_backward(microbatch, access);
        }
        if (pass != BackwardPass::input) slots_.give_back(s);
    }

    int shared_unit() const override {
        return part_.active() && holds_first_stage_ != holds_last_stage_ ? unit(0) : -1;
    }
    bool computes_loss() const override { return !part_.active() || holds_last_stage_; }

    std::size_t activation_bytes_per_layer() const override { return layer_activation_bytes_; }
    ContextAttention* context_attention() override { return context_.get(); }
    std::size_t context_workspace_bytes() const override { return context_workspace_bytes_; }

    double mean_loss(int microbatch) const override { return batch_.mean_loss(device_, microbatch); }

    double auxiliary_loss(int microbatch) const override {
        return moe_state_ ? moe_state_->auxiliary_loss(microbatch) : 0.0;
    }
    MoeMemory moe_memory() const override {
        if (!moe_layer_) return {};
        return MoeMemory{moe_kept_bytes_, moe_scratch_bytes_, moe_layer_->shape()};
    }
    std::vector<int> moe_layers() const override { return moe_state_ ? moe_state_->layers() : std::vector<int>{}; }
    // --moe-a2a-overlap-1f1b: while this pass waits on an exchange, on_post runs the partner
    // pass, which binds its own slot and sets the running pass's fields; they are put back after.
    void set_moe_exchange_switch(std::function<void()> on_post) override {
        if (!moe_layer_) return;
        if (!on_post) return moe_layer_->set_exchange_switch({});
        moe_layer_->set_exchange_switch([this, on_post = std::move(on_post)] {
            const ActivationSlot* slot = bound_slot_;
            const LayerRange range = bound_range_;
            const int microbatch = microbatch_;
            const bool recomputing = recomputing_;
            const float loss_scale = loss_scale_;
            const float* head_params = head_params_;
            on_post();
            if (slot != nullptr) bind(*slot, range);
            microbatch_ = microbatch;
            recomputing_ = recomputing;
            loss_scale_ = loss_scale;
            head_params_ = head_params;
        });
    }

    std::vector<MoeLayerStats> finish_step() override {
        return moe_state_ ? moe_state_->finish_step() : std::vector<MoeLayerStats>{};
    }

  private:
    bool is_moe(int l) const { return config_.moe && config_.moe->is_moe_layer(l); }

    // `keep_for_head`: leave unit 0 acquired for head_forward (the tied output projection).
    void embedding_forward(int microbatch, ParameterAccess& access, bool keep_for_head) {
        const int BT = B_ * T_;
        const int* tokens = batch_.tokens(microbatch);
        NvtxRange range("embedding forward");
        const float* p = access.acquire(unit(0));
        // Vocab-parallel embedding: each rank looks up the tokens of its vocabulary shard
        // (zero for the others), then the partial sums are reduced.
        float* partial = tp_.sequence_parallel() ? gathered_ : encoded_;
        const float* wpe = tp_.adds_replicated_terms() ? position_rows(param(p, tensors_.embedding.wpe)) : nullptr;
        ops_.encoder_forward(partial, tokens, param(p, tensors_.embedding.wte), wpe, B_, T_, C_, vocab_);
        tp_.leave(partial, encoded_, BT, C_);
        if (keep_for_head)
            head_params_ = p;
        else
            access.release(unit(0));
    }

    void block_forward(int l, ParameterAccess& access) {
        NvtxRange range(numbered_range_name("h", l, " forward"));
        const float* p = access.acquire(unit(l + 1));
        const float* e = is_moe(l) ? access.acquire(unit(moe_expert_unit(config_, l))) : nullptr;
        block_forward_compute(l, p, e);
        if (is_moe(l)) access.release(unit(moe_expert_unit(config_, l)));
        access.release(unit(l + 1));
    }

    // The layer's forward with its parameters `p` (and `e`, an MoE layer's routed experts): in
    // forward, and again in backward under full recompute (into the shared buffers, from the
    // kept layer input).
    void block_forward_compute(int l, const float* p, const float* e) {
        const int BT = B_ * T_;
        const BlockTensors& w = tensors_.blocks[static_cast<std::size_t>(l)];
        const BlockActivations& a = blocks_[static_cast<std::size_t>(l)];
        const float* residual = l == first_layer_ ? encoded_ : blocks_[static_cast<std::size_t>(l - 1)].residual3;
        ops_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, residual, param(p, w.ln1w), param(p, w.ln1b), R_, C_);
        const float* ln1 = tp_.enter(a.ln1, gathered_, BT, C_);
        if (context_) {
            for (int part = 0; part < 3; ++part)  // q, k, v from their row slices of the fused weight
                matmuls_.forward(qkv_part(a.qkv, part), ln1, param(p, w.qkvw) + qkv_weight_offset(part),
                                 param(p, w.qkvb) + qkv_bias_offset(part), BT, C_, Cl_);
            context_->forward(a.atty, a.att, qkv_part(a.qkv, 0), qkv_part(a.qkv, 1), qkv_part(a.qkv, 2));
        } else {
            matmuls_.forward(a.qkv, ln1, param(p, w.qkvw), param(p, w.qkvb), BT, C_, 3 * Cl_);
            if (sequence_)
                sequence_->forward(ops_, a.atty, a.att, sequence_workspace_, a.qkv, a.qkv + Cl_, a.qkv + 2 * Cl_);
            else
                ops_.attention_forward(a.atty, preatt_, a.att, a.qkv, B_, T_, Cl_, NHl_);
        }
        matmuls_.forward(projection_, a.atty, param(p, w.attprojw), replicated_term(p, w.attprojb), BT, Cl_, C_);
        const float* attention = tp_.leave(projection_, projection_local_, BT, C_);
        ops_.residual_forward(a.residual2, residual, attention, residual_elements());
        ops_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, param(p, w.ln2w), param(p, w.ln2b), R_,
                               C_);
        const float* mlp = projection_;
        if (is_moe(l)) {
            // On this rank's R rows of ln2 (all of them without SP): no gather, no reduction.
            moe_state_->forward(*moe_layer_, l, microbatch_, recomputing_, projection_, a.moe, a.ln2,
                                moe_weights(full_layout_, p, e, w));
        } else {
            const float* ln2 = tp_.enter(a.ln2, gathered_, BT, C_);
            matmuls_.forward(a.fch, ln2, param(p, w.fcw), param(p, w.fcb), BT, C_, Fl_);
            ops_.gelu_forward(a.fch_gelu, a.fch, rows() * Fl_);
            matmuls_.forward(projection_, a.fch_gelu, param(p, w.fcprojw), replicated_term(p, w.fcprojb), BT, Fl_,
                             C_);
            mlp = tp_.leave(projection_, projection_local_, BT, C_);
        }
        ops_.residual_forward(a.residual3, a.residual2, mlp, residual_elements());
    }

    void head_forward(int microbatch, ParameterAccess& access) {
        const int BT = B_ * T_;
        NvtxRange range("head forward");
        if (head_params_ == nullptr) head_params_ = access.acquire(unit(0));
        const float* p = head_params_;
        const EmbeddingTensors& e = tensors_.embedding;
        ops_.layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, last_residual(), param(p, e.lnfw), param(p, e.lnfb), R_, C_);
        const float* lnf = tp_.enter(lnf_, gathered_, BT, C_);
        matmuls_.forward(logits_, lnf, param(p, e.wte), nullptr, BT, C_, vocab_.size);
        // Vocab-parallel cross-entropy (Megatron-LM sec. 3): the logits stay split; the loss
        // needs only each row's max, sum of exponentials and target logit over the group,
        // three all-reduces of B·T floats.
        const int* targets = batch_.targets(microbatch);
        ops_.row_max(maxes_, logits_, BT, vocab_.size);
        tp_.allreduce_max(maxes_, rows());
        ops_.row_sum_exp(sums_, logits_, maxes_, BT, vocab_.size);
        tp_.allreduce_sum(sums_, rows());
        ops_.target_logit(target_logits_, logits_, targets, BT, vocab_.size, vocab_);
        tp_.allreduce_sum(target_logits_, rows());
        ops_.crossentropy_losses_from_parts(batch_.losses(microbatch), maxes_,
                                            sums_, target_logits_, BT);
    }

    void head_backward(int microbatch, float loss_scale, ParameterAccess& access) {
        const int BT = B_ * T_;
        const EmbeddingTensors& e = tensors_.embedding;
        float* embedding_grads = access.gradients(unit(0));
        NvtxRange range("head backward");
        // Acquired by forward's head and kept, unless a pipeline ran other micro-batches since.
        const float* p = head_params_ != nullptr ? head_params_ : access.acquire(unit(0));
        ops_.fill(dlosses_, loss_scale, rows());
        ops_.crossentropy_shard_backward_overwrite(dlogits_, dlosses_, logits_, maxes_, sums_,
                                                   batch_.targets(microbatch), BT, vocab_.size, vocab_);
        // SP keeps only token chunks; a split region's input is gathered again for its
        // weight gradient (arXiv 2205.05198 sec. 4.2.2), here and in every block.
        const float* lnf = tp_.enter(lnf_, gathered_, BT, C_);
        matmuls_.backward_overwrite_input(dnormed_, grad(embedding_grads, e.wte), nullptr, dlogits_, lnf,
                                          param(p, e.wte), BT, C_, vocab_.size);
        const float* dlnf = tp_.enter_backward(dnormed_, dnormed_local_, BT, C_);
        ops_.fill(dresidual_, 0.0f, residual_elements());
        norms_.begin(2);
        ops_.layernorm_backward(dresidual_, norms_.gradient(grad(embedding_grads, e.lnfw), 0),
                                norms_.gradient(grad(embedding_grads, e.lnfb), 1), dlnf, last_residual(),
                                param(p, e.lnfw), lnf_mean_, lnf_rstd_, R_, C_);
        norms_.finish({grad(embedding_grads, e.lnfw), grad(embedding_grads, e.lnfb)});
        access.release(unit(0));
        head_params_ = nullptr;
    }

    // BackwardPass::input leaves the four matmuls' weight gradients to block_weights: their
    // output gradients go to the slot's stash (their inputs are kept activations already);
    // the LayerNorms' small gradients are taken at once.
    void block_backward(int l, BackwardPass pass, ParameterAccess& access) {
        const int BT = B_ * T_;
        const std::size_t btc = rows() * static_cast<std::size_t>(C_);
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
            recomputing_ = true;
            block_forward_compute(l, p, e);
            recomputing_ = false;
        }
        const BlockTensors& w = tensors_.blocks[static_cast<std::size_t>(l)];
        const BlockActivations& a = blocks_[static_cast<std::size_t>(l)];
        const WeightGradientStash* stash = defer ? &stash_[static_cast<std::size_t>(l)] : nullptr;
        auto weight_grad = [&](int tensor) { return defer ? nullptr : grad(g, tensor); };
        const float* residual = l == first_layer_ ? encoded_ : blocks_[static_cast<std::size_t>(l - 1)].residual3;
        const std::size_t wide = rows() * static_cast<std::size_t>(Fl_);
        const std::size_t local_channels = rows() * static_cast<std::size_t>(Cl_);
        float* dwide2 = defer ? stash->dfc : dwide2_;
        float* dqkv = defer ? stash->dqkv : dqkv_;
        norms_.begin(4);
        // dresidual_ holds d(residual3): it flows unchanged into both branches' sums.
        const float* dln2 = dnormed_;
        if (is_moe(l)) {
            // On this rank's R rows, as the forward: d(residual3) and ln2 as they are.
            ops_.fill(dnormed_, 0.0f, residual_elements());
            moe_state_->backward(*moe_layer_, moe_pack_, l, dnormed_,
                                 moe_gradients(full_layout_, g, access.gradients(experts_unit), w), dresidual_, a.moe,
                                 a.ln2, moe_weights(full_layout_, p, e, w), R_, loss_scale_);
        } else {
            const float* dmlp = tp_.leave_backward(dresidual_, dgathered_, BT, C_);
            if (defer) copy_floats(ops_, stash->dmlp, dmlp, btc);
            matmuls_.backward_overwrite_input(dwide_, weight_grad(w.fcprojw), weight_grad(w.fcprojb), dmlp, a.fch_gelu,
                                              param(p, w.fcprojw), BT, Fl_, C_);
            ops_.gelu_backward_overwrite(dwide2, a.fch, dwide_, wide);
            const float* ln2 = tp_.enter(a.ln2, gathered_, BT, C_);
            matmuls_.backward_overwrite_input(dnormed_, weight_grad(w.fcw), weight_grad(w.fcb), dwide2, ln2,
                                              param(p, w.fcw), BT, C_, Fl_);
            dln2 = tp_.enter_backward(dnormed_, dnormed_local_, BT, C_);
        }
        ops_.layernorm_backward(dresidual_, norms_.gradient(grad(g, w.ln2w), 2), norms_.gradient(grad(g, w.ln2b), 3),
                                dln2, a.residual2, param(p, w.ln2w), a.ln2_mean, a.ln2_rstd, R_, C_);
        // dresidual_ now holds d(residual2).
        const float* dattention = tp_.leave_backward(dresidual_, dgathered_, BT, C_);
        if (defer) copy_floats(ops_, stash->dattention, dattention, btc);
        if (recompute_ == Recompute::selective && keeps_probabilities()) {
            // The attention core again, from the kept QKV: its probabilities into the shared
            // buffer (its output, already kept, lands in scratch that is overwritten next).
            NvtxRange recompute_range(numbered_range_name("h", l, " recompute attention"));
            ops_.attention_forward(datty_, preatt_, a.att, a.qkv, B_, T_, Cl_, NHl_);
        }
        matmuls_.backward_overwrite_input(datty_, weight_grad(w.attprojw), weight_grad(w.attprojb), dattention,
                                          a.atty, param(p, w.attprojw), BT, Cl_, C_);
        ops_.fill(dqkv, 0.0f, 3 * local_channels);
        if (context_)
            context_->backward(qkv_part(dqkv, 0), qkv_part(dqkv, 1), qkv_part(dqkv, 2), datty_, a.atty, a.att,
                               qkv_part(a.qkv, 0), qkv_part(a.qkv, 1), qkv_part(a.qkv, 2));
        else if (sequence_)
            sequence_->backward(ops_, dqkv, dqkv + Cl_, dqkv + 2 * Cl_, sequence_workspace_, datty_, a.atty, a.att,
                                a.qkv, a.qkv + Cl_, a.qkv + 2 * Cl_);
        else
            ops_.attention_backward(dqkv, dpreatt_, datt_, datty_, a.qkv, a.att, B_, T_, Cl_, NHl_);
        const float* ln1 = tp_.enter(a.ln1, gathered_, BT, C_);
        ops_.fill(dnormed_, 0.0f, btc);
        qkv_backward(dnormed_, defer ? nullptr : grad(g, w.qkvw), defer ? nullptr : grad(g, w.qkvb), dqkv, ln1,
                     param(p, w.qkvw));
        const float* dln1 = tp_.enter_backward(dnormed_, dnormed_local_, BT, C_);
        ops_.layernorm_backward(dresidual_, norms_.gradient(grad(g, w.ln1w), 0), norms_.gradient(grad(g, w.ln1b), 1),
                                dln1, residual, param(p, w.ln1w), a.ln1_mean, a.ln1_rstd, R_, C_);
        norms_.finish({grad(g, w.ln1w), grad(g, w.ln1b), grad(g, w.ln2w), grad(g, w.ln2b)});
        // dresidual_ now holds d(residual), the previous block's output.
        if (experts_unit >= 0) {
            access.release(experts_unit);
            access.gradients_complete(experts_unit);
        }
        access.release(unit(l + 1));
        if (!defer) access.gradients_complete(unit(l + 1));
    }

    // W of a split backward: the weight gradients block_backward(input) left, from the
    // stashed output gradients and the kept inputs. Sequence parallelism is refused with
    // zero-bubble schedules (train_options.cpp), so the inputs need no gather here.
    void block_weights(int l, ParameterAccess& access) {
        const int BT = B_ * T_;
        if (is_moe(l)) return;  // its input pass took every weight gradient
        NvtxRange range(numbered_range_name("h", l, " weight gradients (W)"));
        const float* p = access.acquire(unit(l + 1));
        float* g = access.gradients(unit(l + 1));
        const BlockTensors& w = tensors_.blocks[static_cast<std::size_t>(l)];
        const BlockActivations& a = blocks_[static_cast<std::size_t>(l)];
        const WeightGradientStash& st = stash_[static_cast<std::size_t>(l)];
        matmuls_.backward(nullptr, grad(g, w.fcprojw), grad(g, w.fcprojb), st.dmlp, a.fch_gelu, param(p, w.fcprojw),
                          BT, Fl_, C_);
        matmuls_.backward(nullptr, grad(g, w.fcw), grad(g, w.fcb), st.dfc, a.ln2, param(p, w.fcw), BT, C_, Fl_);
        matmuls_.backward(nullptr, grad(g, w.attprojw), grad(g, w.attprojb), st.dattention, a.atty,
                          param(p, w.attprojw), BT, Cl_, C_);
        qkv_backward(nullptr, grad(g, w.qkvw), grad(g, w.qkvb), st.dqkv, a.ln1, param(p, w.qkvw));
        access.release(unit(l + 1));
        access.gradients_complete(unit(l + 1));
    }

    void embedding_backward(int microbatch, ParameterAccess& access) {
        const int BT = B_ * T_;
        const EmbeddingTensors& e = tensors_.embedding;
        float* embedding_grads = access.gradients(unit(0));
        NvtxRange range("embedding backward");
        // Every rank computes the position embedding's gradient from the same whole output
        // gradient, so the replicas of wpe stay identical.
        const float* dencoded = tp_.leave_backward(dresidual_, dgathered_, BT, C_);
        float* dwpe = grad(embedding_grads, e.wpe);
        if (context_) ops_.fill(dwpe_local_, 0.0f, static_cast<std::size_t>(T_) * C_);
        ops_.encoder_backward(grad(embedding_grads, e.wte), context_ ? dwpe_local_ : dwpe, dencoded,
                              batch_.tokens(microbatch), B_, T_, C_, vocab_);
        if (context_)  // each held position's gradient back to its row of wpe
            for (const PositionRun& run : position_runs_)
                ops_.add_inplace(dwpe + static_cast<std::size_t>(run.first) * C_,
                                 dwpe_local_ + static_cast<std::size_t>(run.local) * C_,
                                 static_cast<std::size_t>(run.length) * C_);
        access.gradients_complete(unit(0));
    }

    // wpe's rows of this rank's positions: wpe itself without context parallelism, else
    // gathered run by run into wpe_local_ (T,C).
    const float* position_rows(const float* wpe) {
        if (!context_) return wpe;
        for (const PositionRun& run : position_runs_)
            copy_floats(ops_, wpe_local_ + static_cast<std::size_t>(run.local) * C_,
                        wpe + static_cast<std::size_t>(run.first) * C_, static_cast<std::size_t>(run.length) * C_);
        return wpe_local_;
    }

    // Under context parallelism q, k and v lie apart in a qkv buffer (B,T,Cl each), and each
    // is the matmul with its row slice of the fused (3Cl, C) weight and its bias slice.
    float* qkv_part(float* qkv, int part) const { return qkv + static_cast<std::size_t>(part) * rows() * Cl_; }
    const float* qkv_part(const float* qkv, int part) const {
        return qkv + static_cast<std::size_t>(part) * rows() * Cl_;
    }
    std::size_t qkv_weight_offset(int part) const { return static_cast<std::size_t>(part) * Cl_ * C_; }
    std::size_t qkv_bias_offset(int part) const { return static_cast<std::size_t>(part) * Cl_; }

    // The QKV matmul's backward: dinp += (if given), dweight and dbias += (if given).
    void qkv_backward(float* dinp, float* dweight, float* dbias, const float* dqkv, const float* inp,
                      const float* weight) {
        const int BT = B_ * T_;
        if (!context_) {
            matmuls_.backward(dinp, dweight, dbias, dqkv, inp, weight, BT, C_, 3 * Cl_);
            return;
        }
        for (int part = 0; part < 3; ++part)
            matmuls_.backward(dinp, dweight ? dweight + qkv_weight_offset(part) : nullptr,
                              dbias ? dbias + qkv_bias_offset(part) : nullptr, qkv_part(dqkv, part), inp,
                              weight ? weight + qkv_weight_offset(part) : nullptr, BT, C_, Cl_);
    }

    // The head's buffers of one micro-batch (the last stage's).
    struct HeadActivations {
        float *lnf = nullptr, *lnf_mean = nullptr, *lnf_rstd = nullptr, *logits = nullptr, *maxes = nullptr,
              *sums = nullptr, *target_logits = nullptr;
    };
    using KeptPool = KeptActivations<BlockActivations, WeightGradientStash, HeadActivations>;
    // One micro-batch's activations of one chunk: blocks indexed by layer (only the chunk's
    // are set), the head's on the last stage, and the boundary buffers.
    using ActivationSlot = KeptPool::Slot;

    int unit(int global_unit) const {
        const int local = local_unit_.at(static_cast<std::size_t>(global_unit));
        if (local < 0) throw std::logic_error("GPT: unit " + std::to_string(global_unit) + " is not on this stage");
        return local;
    }

    void bind(const ActivationSlot& s, const LayerRange& range) {
        bound_slot_ = &s;
        bound_range_ = range;
        first_layer_ = range.first;
        encoded_ = s.input;
        blocks_ = s.blocks;
        stash_ = s.stash;
        dresidual_ = s.gradient;
        if (range.end == L_) {
            lnf_ = s.head.lnf;
            lnf_mean_ = s.head.lnf_mean;
            lnf_rstd_ = s.head.lnf_rstd;
            logits_ = s.head.logits;
            maxes_ = s.head.maxes;
            sums_ = s.head.sums;
            target_logits_ = s.head.target_logits;
        }
    }

    // The matmuls a block runs (QKV, attention projection, MLP up and down), and the logits
    // where this rank computes the head; they size the bf16 operand copies.
    std::vector<MatmulShape> matmul_shapes(const PipelinePart& part) const {
        const int BT = B_ * T_;
        std::vector<MatmulShape> shapes{{BT, C_, 3 * Cl_}, {BT, Cl_, C_}, {BT, C_, Fl_}, {BT, Fl_, C_}};
        if (context_split_.size > 1) shapes.front() = {BT, C_, Cl_};  // q, k, v apart
        const bool head = !part.active() || std::any_of(part.chunks.begin(), part.chunks.end(),
                                                        [&](const LayerRange& r) { return r.end == L_; });
        if (head) shapes.push_back({BT, C_, vocab_.size});
        if (config_.moe)
            for (const MatmulShape& s : moe_expert_matmul_shapes(model_moe_shape(config_, R_, moe_context_)))
                shapes.push_back(s);
        return shapes;
    }

    // One layer's activations. Under full recompute only its output (the next layer's input)
    // is the layer's own, the rest is the shared set every layer's recompute overwrites; under
    // selective recompute the attention probabilities are shared. Counted per layer: what is
    // the layer's own.
    BlockActivations allocate_block(int l) {
        const std::size_t before = ledger_.usage().live_of(MemoryCategory::activations);
        BlockActivations a{};
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

    // Every buffer of a layer (the probabilities too when `with_probabilities`), with a dense
    // MLP's and/or an MoE MLP's.
    BlockActivations allocate_block_buffers(bool with_probabilities, bool dense_mlp, bool moe_mlp) {
        const std::size_t rc = residual_elements();
        const std::size_t r = static_cast<std::size_t>(R_);
        const std::size_t local_channels = rows() * static_cast<std::size_t>(Cl_);
        const std::size_t wide = rows() * static_cast<std::size_t>(Fl_);
        const std::size_t att = context_    ? context_->saved_floats()
                                : sequence_ ? sequence_->saved_floats()
                                            : static_cast<std::size_t>(B_) * NHl_ * T_ * T_;
        BlockActivations a{};
        a.ln1 = arena_.floats(rc);
        a.ln1_mean = arena_.floats(r);
        a.ln1_rstd = arena_.floats(r);
        a.qkv = arena_.floats(3 * local_channels);
        a.atty = arena_.floats(local_channels);
        if (with_probabilities) a.att = arena_.floats(att);
        a.residual2 = arena_.floats(rc);
        a.ln2 = arena_.floats(rc);
        a.ln2_mean = arena_.floats(r);
        a.ln2_rstd = arena_.floats(r);
        if (dense_mlp) {
            a.fch = arena_.floats(wide);
            a.fch_gelu = arena_.floats(wide);
        }
        if (moe_mlp) {
            const std::size_t before = ledger_.usage().live_of(MemoryCategory::activations);
            a.moe = moe_layer_->allocate_activations(arena_);
            moe_kept_bytes_ = ledger_.usage().live_of(MemoryCategory::activations) - before;
        }
        a.residual3 = arena_.floats(rc);
        return a;
    }

    // The rank's pool (theory/pipeline/partition.hpp's activation_pool, what plan counts): layer
    // stores of each kind (dense, MoE) apart, as llama.cpp's.
    void allocate_slots() {
        const std::size_t rc = residual_elements();
        const std::size_t logits = rows() * static_cast<std::size_t>(vocab_.size);
        for (const LayerRange& range : part_.chunks) {
            holds_first_stage_ = holds_first_stage_ || range.first == 0;
            holds_last_stage_ = holds_last_stage_ || range.end == L_;
        }
        const std::vector<int> kinds = transformer_layer_store_kinds(config_, recompute_);
        const ActivationPool pool = activation_pool(part_, kinds);
        slots_ = KeptPool("GPT", part_.chunks, kinds);
        for (int i = 0; i < pool.slots; ++i) slots_.add_slot(arena_.floats(rc), arena_.floats(rc));
        for (std::size_t kind = 0; kind < pool.layer_stores.size(); ++kind) {
            const int layer = layer_for_store_kind(config_, kinds, static_cast<int>(kind));
            for (int i = 0; i < pool.layer_stores[kind]; ++i) {
                const BlockActivations block = allocate_block(layer);
                // An MoE layer defers nothing to W: its stores have no stash (zb-h1 refuses full
                // recompute, so the MoE layers' kind is their own there).
                WeightGradientStash stash{};
                if (part_.split_backward && !is_moe(layer))
                    stash = WeightGradientStash{arena_.floats(rows() * static_cast<std::size_t>(C_)),
                                                arena_.floats(rows() * static_cast<std::size_t>(Fl_)),
                                                arena_.floats(rows() * static_cast<std::size_t>(C_)),
                                                arena_.floats(3 * rows() * static_cast<std::size_t>(Cl_))};
                slots_.add_store(static_cast<int>(kind), block, stash);
            }
        }
        for (int i = 0; i < pool.heads; ++i) {
            HeadActivations head;
            head.lnf = arena_.floats(rc);
            head.lnf_mean = arena_.floats(static_cast<std::size_t>(R_));
            head.lnf_rstd = arena_.floats(static_cast<std::size_t>(R_));
            head.logits = arena_.floats(logits);
            head.maxes = arena_.floats(rows());
            head.sums = arena_.floats(rows());
            head.target_logits = arena_.floats(rows());
            slots_.add_head(head);
        }
    }

    std::size_t rows() const { return static_cast<std::size_t>(B_) * static_cast<std::size_t>(T_); }
    // The standard attention: its probabilities (B,NHl,T,T) are what a layer keeps, and what
    // selective recompute shares between layers.
    bool keeps_probabilities() const { return !context_ && !sequence_; }
    const float* param(const float* unit_base, int tensor) const {
        return unit_base + full_layout_.tensor(tensor).offset_in_unit;
    }
    float* grad(float* unit_base, int tensor) const { return unit_base + full_layout_.tensor(tensor).offset_in_unit; }
    const float* last_residual() const { return blocks_.back().residual3; }
    // Elements of a LayerNorm / residual region activation on this rank: (R,C).
    std::size_t residual_elements() const { return static_cast<std::size_t>(R_) * static_cast<std::size_t>(C_); }
    // A whole term (row-parallel bias) that the group's rank 0 alone adds.
    const float* replicated_term(const float* unit_base, int tensor) const {
        return tp_.adds_replicated_terms() ? param(unit_base, tensor) : nullptr;
    }

    void allocate_activations() {
        const std::size_t btc = rows() * static_cast<std::size_t>(C_);
        const std::size_t rc = residual_elements();
        const std::size_t r = static_cast<std::size_t>(R_);
        const std::size_t local_channels = rows() * static_cast<std::size_t>(Cl_);
        const std::size_t wide = rows() * static_cast<std::size_t>(Fl_);
        const std::size_t att = static_cast<std::size_t>(B_) * NHl_ * T_ * T_;
        const std::size_t logits = rows() * static_cast<std::size_t>(vocab_.size);
        const bool sp = tp_.sequence_parallel();
        batch_.allocate(arena_, shape_.microbatches, rows());
        if (recompute_ == Recompute::full)
            recompute_work_ = allocate_block_buffers(true, config_.moe_layer_count() < L_, config_.moe_layer_count() > 0);
        if (recompute_ == Recompute::selective && keeps_probabilities()) recompute_work_.att = arena_.floats(att);
        if (part_.active()) {
            allocate_slots();
        } else {
            encoded_ = arena_.floats(rc);
            for (int l = 0; l < L_; ++l) blocks_.push_back(allocate_block(l));
            lnf_ = arena_.floats(rc);
            lnf_mean_ = arena_.floats(r);
            lnf_rstd_ = arena_.floats(r);
            logits_ = arena_.floats(logits);
            maxes_ = arena_.floats(rows());
            sums_ = arena_.floats(rows());
            target_logits_ = arena_.floats(rows());
            // Backward's running gradient; a pipeline chunk's lives in its slot.
            dresidual_ = arena_.floats(rc);
        }
        if (keeps_probabilities()) preatt_ = arena_.floats(att);
        if (sequence_) sequence_workspace_ = arena_.floats(sequence_->workspace_floats(ops_));
        projection_ = arena_.floats(btc);
        // Backward scratch, reused by every block (llm.c's CUDA trainer does the same).
        dlosses_ = arena_.floats(rows());
        dlogits_ = arena_.floats(logits);
        dnormed_ = arena_.floats(btc);
        dwide_ = arena_.floats(wide);
        dwide2_ = arena_.floats(wide);
        datty_ = arena_.floats(local_channels);
        dqkv_ = arena_.floats(3 * local_channels);
        if (context_) {
            wpe_local_ = arena_.floats(static_cast<std::size_t>(T_) * C_);
            dwpe_local_ = arena_.floats(static_cast<std::size_t>(T_) * C_);
        } else if (keeps_probabilities()) {
            dpreatt_ = arena_.floats(att);
            datt_ = arena_.floats(att);
        }
        norms_.allocate(arena_, 4);
        if (moe_layer_) moe_pack_.allocate(arena_, moe_layer_->shape());
        if (sp) {
            // Whole (B,T,C) scratch for the gathers and the chunks the reduce-scatters leave.
            gathered_ = arena_.floats(btc);
            dgathered_ = arena_.floats(btc);
            projection_local_ = arena_.floats(rc);
            dnormed_local_ = arena_.floats(rc);
        }
    }

    Recompute recompute_;
    MoeContext moe_context_;
    std::unique_ptr<MoeLayer> moe_layer_;      // null without MoE layers
    std::optional<MoeModelState> moe_state_;  // the MoE layers this rank holds (null without)
    std::size_t moe_scratch_bytes_ = 0;       // what the MoE layer took from the ledger
    std::size_t moe_kept_bytes_ = 0;          // what one MoE layer's kept buffers took
    bool recomputing_ = false;                // a full-recompute forward: counts nothing
    float loss_scale_ = 0.0f;                 // the running backward's
    int microbatch_ = 0;                      // the running forward's
    const KeptPool::Slot* bound_slot_ = nullptr;  // what bind() bound last (pipeline only)
    LayerRange bound_range_;
    BlockActivations recompute_work_{};  // full: one layer's buffers; selective: .att only
    ModelConfig config_;
    MicrobatchShape shape_;
    std::uint64_t seed_;
    Ops& ops_;
    Device& device_;
    MemoryLedger& ledger_;
    ActivationArena arena_;
    TensorParallelGroup tp_;
    ContextSplit context_split_;
    int B_, T_, C_, NH_, V_, L_;
    int R_;             // rows of the LayerNorm / residual regions on this rank: B·T, or B·T/t under SP
    int Cl_, NHl_, Fl_; // this rank's attention channels, heads and MLP width (C/t, NH/t, 4C/t)
    VocabShard vocab_;  // this rank's rows of wte and columns of the logits
    Matmuls matmuls_;   // every linear layer, in the run's precision
    std::size_t layer_activation_bytes_ = 0;
    ParameterLayout full_layout_;  // the whole model's tensors (tensor ids index it)
    ParameterLayout layout_;       // the units this rank holds: all, or its pipeline stages'
    PipelinePart part_;
    std::vector<int> local_unit_;  // global unit -> index in layout_, or -1
    bool holds_first_stage_ = false, holds_last_stage_ = false;
    int first_layer_ = 0;          // of the chunk being run
    KeptPool slots_{"GPT", {}, {}};                  // the rank's chunks' (pipeline only)
    std::vector<WeightGradientStash> stash_;          // bound from a slot (split backward only)
    GptTensors tensors_;
    // Context parallelism only: the attention, each held token's position, and the runs of
    // consecutive positions (`length` tokens from position `first`, local index `local`).
    struct PositionRun {
        int first = 0, length = 0, local = 0;
    };
    std::unique_ptr<ContextAttention> context_;
    // Block attention over the whole sequence (no context parallelism), and its workspace.
    std::optional<SequenceAttention> sequence_;
    float* sequence_workspace_ = nullptr;
    std::size_t context_workspace_bytes_ = 0;
    std::vector<int> positions_host_;
    std::vector<PositionRun> position_runs_;
    float *wpe_local_ = nullptr, *dwpe_local_ = nullptr;  // (T,C)

    MicrobatchTokens batch_;
    const float* head_params_ = nullptr;  // unit 0, acquired by forward's encoder or head, released by backward's
    float* encoded_ = nullptr;
    std::vector<BlockActivations> blocks_;
    float *preatt_ = nullptr, *projection_ = nullptr, *lnf_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
    float *logits_ = nullptr, *maxes_ = nullptr, *sums_ = nullptr, *target_logits_ = nullptr;
    // Sequence parallelism only (nullptr otherwise).
    float *gathered_ = nullptr, *dgathered_ = nullptr, *projection_local_ = nullptr, *dnormed_local_ = nullptr;
    NormGradientPack norms_{ops_, tp_, C_};  // the LayerNorms' partial sums under SP
    MoeGradientPack moe_pack_{ops_, tp_};    // the MoE layers' partial sums under SP
    float *dlosses_ = nullptr, *dlogits_ = nullptr, *dnormed_ = nullptr, *dresidual_ = nullptr;
    float *dwide_ = nullptr, *dwide2_ = nullptr, *datty_ = nullptr, *dqkv_ = nullptr, *dpreatt_ = nullptr,
          *datt_ = nullptr;
};

}  // namespace

std::unique_ptr<Model> make_gpt_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                      Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp,
                                      const PipelinePart& part, Precision precision, Recompute recompute,
                                      const ContextGroup& cp, const MoeContext& moe, AttentionKind attention) {
    return std::make_unique<GptModel>(config, shape, seed, ops, ledger, tp, part, precision, recompute, cp, moe,
                                      attention);
}

}  // namespace parbench

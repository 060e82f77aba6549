// The Llama model over the Ops interface, shaped like gpt.cpp (one class, activation slots
// for pipeline chunks, the same tensor-parallel operators) with Llama's pieces:
//
//   h = x + Wo · GQA(RoPE(Wq · n1), RoPE(Wk · n1), Wv · n1),   n1 = RMSNorm(x)
//   y = h + W_down · (silu(W_gate · n2) * (W_up · n2)),        n2 = RMSNorm(h)
//
// Tensor parallelism (Megatron-LM sec. 3) splits Wq by heads and W_gate, W_up by output
// features (column-parallel), Wo and W_down by input features (row-parallel), the embedding
// and the output projection by vocabulary. Wk and Wv are split by key/value heads when the
// tp degree divides them; otherwise every rank holds them whole (replicated) and uses the
// heads its query heads read. A replicated Wk/Wv sees only its rank's query heads'
// gradients, so its gradient is a partial sum, all-reduced over the group; the input
// gradient through it needs nothing more: the column-parallel backward's all-reduce of
// d(n1) sums every rank's part. RMSNorm gains are held whole; under SP their gradients are
// partial sums and are all-reduced (arXiv 2205.05198 sec. 4.2.2), as for GPT's LayerNorms.
// There are no biases and no dropout.
//
// Mixture of experts (a config's "moe"): in its MoE layers the SwiGLU MLP is an MoeLayer over
// the block's R = B·T rows, one routing group per micro-batch. Under tensor parallelism every
// tp rank holds the MoE tensors whole; without SP it runs the layer on the same rows, so its
// output needs no reduction and its input gradient is already the whole sum (it skips the
// MLP's tp_.leave and tp_.enter_backward); under SP on its own R = B·T/t rows (no gather or
// reduce-scatter either), its parameters' partial gradients summed over tp (MoeGradientPack).
//
// Context parallelism (--cp, train/context/context_attention.hpp): the model holds T/c tokens
// of every sequence, those of context_positions(), in that order; RoPE turns each by its own
// position, and attention is ContextAttention's, which keeps for backward only its `saved`
// state per layer (no probabilities: it recomputes them block by block, so selective recompute
// has nothing more to drop). Everything else acts per token, unchanged.
//
// Block attention (theory/engine_attention.hpp chooses flash: --attention, or auto from 256
// tokens on a backend whose block kernels tile): without context parallelism the whole
// sequence's attention is SequenceAttention's (train/ops/sequence_attention.hpp) on the rotated
// q, k and v, keeping the log-sum-exp of each query row in `att` instead of the probabilities
// (selective recompute then has nothing to drop either).
#include "train/models/llama.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
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

using llama_layout::BlockTensors;
using LlamaTensors = llama_layout::Tensors;

// What one block keeps from forward for backward. R = B·T rows, or B·T/t under SP; Cl, KVl,
// Fl: this rank's query channels, key/value channels and SwiGLU width.
struct BlockActivations {
    float* norm1;      // (R,C)
    float* rstd1;      // (R)
    float* q;          // (B,T,Cl), rotated
    float* k;          // (B,T,KVl), rotated
    float* v;          // (B,T,KVl)
    float* atty;       // (B,T,Cl)
    float* att;        // (B,NHl,T,T); under context parallelism ContextAttention's saved state
    float* residual2;  // (R,C)
    float* norm2;      // (R,C)
    float* rstd2;      // (R)
    float* gate;       // (B,T,Fl)
    float* up;         // (B,T,Fl)
    float* glu;        // (B,T,Fl): silu(gate) * up
    float* residual3;  // (R,C)
    MoeActivations moe;  // an MoE layer's, in place of gate, up and glu
};

// A split backward's B keeps the output gradients of the seven matmuls whose weight
// gradients W computes later (arXiv 2401.10241 sec. 2).
struct WeightGradientStash {
    float* dmlp;        // (B,T,C)
    float* dgate;       // (B,T,Fl)
    float* dup;         // (B,T,Fl)
    float* dattention;  // (B,T,C)
    float* dq;          // (B,T,Cl)
    float* dk;          // (B,T,KVl)
    float* dv;          // (B,T,KVl)
};

class LlamaModel : public Model {
  public:
    LlamaModel(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed, Ops& ops,
               MemoryLedger& ledger, const TensorParallelGroup& tp, const PipelinePart& part, Precision precision,
               Recompute recompute, const ContextGroup& cp, const MoeContext& moe, AttentionKind attention)
        : recompute_(recompute), moe_context_(moe), config_(config), shape_(shape), seed_(seed), ops_(ops), device_(ledger.device()), ledger_(ledger),
          arena_(ledger), tp_(tp), B_(shape.batch), T_(shape.seq_len / cp.split.size), C_(config.hidden), NH_(config.heads),
          V_(config.vocab), L_(config.layers), hs_(config.hidden / config.heads),
          R_(tp.local_rows(shape.batch * (shape.seq_len / cp.split.size))), Cl_(config.hidden / tp.size()),
          NHl_(config.heads / tp.size()), Fl_(config.ffn_hidden / tp.size()),
          kv_split_(llama_kv_heads_split(config, tp.size())),
          NKVl_(kv_split_ ? config.kv_heads / tp.size() : config.kv_heads), KVl_(NKVl_ * hs_),
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
        tensors_ = llama_layout::build(config, tp.split(), full_layout_, experts);
        local_unit_.assign(full_layout_.units().size(), -1);
        std::vector<int> units;
        if (part.active()) {
            units = pipeline_part_units(config, part);
        } else {
            for (int u = 0; u < static_cast<int>(full_layout_.units().size()); ++u) units.push_back(u);
        }
        for (std::size_t i = 0; i < units.size(); ++i)
            local_unit_[static_cast<std::size_t>(units[i])] = static_cast<int>(i);
        layout_ = part.active() ? full_layout_.select_units(units) : full_layout_;
        // Query head h of this rank is global head rank·NHl + h; with split key/value heads
        // the local numbering starts at 0 in both, with replicated ones the global is kept.
        gqa_ = GqaShape{B_, T_, NHl_, NKVl_, hs_, kv_split_ ? 0 : tp.rank() * NHl_, config.heads / config.kv_heads};
        if (!cp.active() && attention == AttentionKind::flash)
            sequence_.emplace(gqa_, static_cast<int>(gqa_.q_width()), static_cast<int>(gqa_.kv_width()));
        if (cp.active()) {
            const std::size_t before = ledger.usage().live_of(MemoryCategory::activations);
            context_ = std::make_unique<ContextAttention>(*cp.comm, ops, ledger, cp.split, gqa_, shape.seq_len);
            context_workspace_bytes_ = ledger.usage().live_of(MemoryCategory::activations) - before;
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
        if (context_) {
            positions_host_ = context_positions(shape.seq_len, cp.split);
        } else {
            positions_host_.resize(static_cast<std::size_t>(T_));
            std::iota(positions_host_.begin(), positions_host_.end(), 0);
        }
        positions_ = arena_.buffer(positions_host_.size() * sizeof(int));
        device_.copy_from_host(positions_, positions_host_.data(), positions_host_.size() * sizeof(int));
    }

    const ParameterLayout& layout() const override { return layout_; }

    // Blocks forward, the head (kept into backward), blocks backward; an MoE layer's routed
    // experts right after its block (theory/rank_traffic.hpp).
    std::vector<int> parameter_use_order() const override { return model_parameter_use_order(config_, part_); }

    void stage_batch(int microbatch, std::uint64_t first_sample) override {
        batch_.stage(device_, microbatch, seed_, first_sample, B_, shape_.seq_len, V_,
                     context_ ? positions_host_ : std::vector<int>{});
    }

    void forward(int microbatch, ParameterAccess& access) override {
        microbatch_ = microbatch;
        embedding_forward(microbatch, access);
        for (int l = 0; l < L_; ++l) block_forward(l, access);
        head_forward(microbatch, access);
    }

    void backward(int microbatch, float loss_scale, ParameterAccess& access) override {
        loss_scale_ = loss_scale;
        head_backward(microbatch, loss_scale, access);
        for (int l = L_ - 1; l >= 0; --l) block_backward(l, BackwardPass::full, access);
        embedding_backward(microbatch, access);
    }

    // ---- pipeline chunks (as gpt.cpp: one pool of kept activations for the rank's chunks) --
    std::size_t boundary_numel() const override { return residual_elements(); }
    float* boundary_input(int microbatch, int chunk) override { return slots_.take(microbatch, chunk).input; }
    const float* boundary_output(int microbatch, int chunk) override {
        const LayerRange& range = part_.chunks.at(static_cast<std::size_t>(chunk));
        return slots_.take(microbatch, chunk).blocks[static_cast<std::size_t>(range.end - 1)].residual3;
    }
    float* boundary_gradient(int microbatch, int chunk) override { return slots_.held(microbatch, chunk).gradient; }

    void forward_chunk(int microbatch, int chunk, ParameterAccess& access) override {
        const LayerRange& range = part_.chunks.at(static_cast<std::size_t>(chunk));
        bind(slots_.take(microbatch, chunk), range);
        microbatch_ = microbatch;
        if (range.first == 0) embedding_forward(microbatch, access);
        for (int l = range.first; l < range.end; ++l) block_forward(l, access);
        if (range.end == L_) {
            head_forward(microbatch, access);
            access.release(unit(head_unit()));  // the backward acquires it again: other passes run between
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
            if (range.end == L_) head_backward(microbatch, loss_scale, access);
            for (int l = range.end - 1; l >= range.first; --l) block_backward(l, pass, access);
            if (range.first == 0) embedding_backward(microbatch, access);
        }
        if (pass != BackwardPass::input) slots_.give_back(s);
    }

    // The embedding and the output projection are separate tensors: no stage shares a unit.
    int shared_unit() const override { return -1; }
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
    int head_unit() const { return L_ + 1; }

    bool is_moe(int l) const { return config_.moe && config_.moe->is_moe_layer(l); }

    void embedding_forward(int microbatch, ParameterAccess& access) {
        const int BT = B_ * T_;
        NvtxRange range("embedding forward");
        const float* p = access.acquire(unit(0));
        // Vocab-parallel embedding: each rank looks up its shard's tokens (zero for the
        // others), then the partial sums are reduced. Llama has no position embedding.
        float* partial = tp_.sequence_parallel() ? gathered_ : encoded_;
        ops_.encoder_forward(partial, batch_.tokens(microbatch), param(p, tensors_.wte),
                             nullptr, B_, T_, C_, vocab_);
        tp_.leave(partial, encoded_, BT, C_);
        access.release(unit(0));
    }

    const float* block_input(int l) const {
        return l == first_layer_ ? encoded_ : blocks_[static_cast<std::size_t>(l - 1)].residual3;
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
        const float* residual = block_input(l);
        const float eps = static_cast<float>(config_.norm_eps);
        const float theta = static_cast<float>(config_.rope_theta);
        ops_.rmsnorm_forward(a.norm1, a.rstd1, residual, param(p, w.norm1), R_, C_, eps);
        const float* n1 = tp_.enter(a.norm1, gathered_, BT, C_);
        matmuls_.forward(a.q, n1, param(p, w.wq), nullptr, BT, C_, Cl_);
        matmuls_.forward(a.k, n1, param(p, w.wk), nullptr, BT, C_, KVl_);
        matmuls_.forward(a.v, n1, param(p, w.wv), nullptr, BT, C_, KVl_);
        ops_.rope_forward(a.q, positions_.as<int>(), B_, T_, NHl_, hs_, theta);
        ops_.rope_forward(a.k, positions_.as<int>(), B_, T_, NKVl_, hs_, theta);
        if (context_)
            context_->forward(a.atty, a.att, a.q, a.k, a.v);
        else if (sequence_)
            sequence_->forward(ops_, a.atty, a.att, sequence_workspace_, a.q, a.k, a.v);
        else
            ops_.gqa_attention_forward(a.atty, preatt_, a.att, a.q, a.k, a.v, gqa_);
        matmuls_.forward(projection_, a.atty, param(p, w.wo), nullptr, BT, Cl_, C_);
        const float* attention = tp_.leave(projection_, projection_local_, BT, C_);
        ops_.residual_forward(a.residual2, residual, attention, residual_elements());
        ops_.rmsnorm_forward(a.norm2, a.rstd2, a.residual2, param(p, w.norm2), R_, C_, eps);
        const float* mlp = projection_;
        if (is_moe(l)) {
            // On this rank's R rows of norm2 (all of them without SP): no gather, no reduction.
            moe_state_->forward(*moe_layer_, l, microbatch_, recomputing_, projection_, a.moe, a.norm2,
                                moe_weights(full_layout_, p, e, w));
        } else {
            const float* n2 = tp_.enter(a.norm2, gathered_, BT, C_);
            matmuls_.forward(a.gate, n2, param(p, w.wgate), nullptr, BT, C_, Fl_);
            matmuls_.forward(a.up, n2, param(p, w.wup), nullptr, BT, C_, Fl_);
            ops_.swiglu_forward(a.glu, a.gate, a.up, rows() * Fl_);
            matmuls_.forward(projection_, a.glu, param(p, w.wdown), nullptr, BT, Fl_, C_);
            mlp = tp_.leave(projection_, projection_local_, BT, C_);
        }
        ops_.residual_forward(a.residual3, a.residual2, mlp, residual_elements());
    }

    void head_forward(int microbatch, ParameterAccess& access) {
        const int BT = B_ * T_;
        NvtxRange range("head forward");
        head_params_ = access.acquire(unit(head_unit()));
        const float* p = head_params_;
        ops_.rmsnorm_forward(norm_final_, rstd_final_, last_residual(), param(p, tensors_.norm_final), R_, C_,
                             static_cast<float>(config_.norm_eps));
        const float* nf = tp_.enter(norm_final_, gathered_, BT, C_);
        matmuls_.forward(logits_, nf, param(p, tensors_.wout), nullptr, BT, C_, vocab_.size);
        // Vocab-parallel cross-entropy (Megatron-LM sec. 3), as gpt.cpp.
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
        float* g = access.gradients(unit(head_unit()));
        NvtxRange range("head backward");
        const float* p = head_params_ != nullptr ? head_params_ : access.acquire(unit(head_unit()));
        ops_.fill(dlosses_, loss_scale, rows());
        ops_.crossentropy_shard_backward_overwrite(dlogits_, dlosses_, logits_, maxes_, sums_,
                                                   batch_.targets(microbatch), BT, vocab_.size, vocab_);
        const float* nf = tp_.enter(norm_final_, gathered_, BT, C_);
        matmuls_.backward_overwrite_input(dnormed_, grad(g, tensors_.wout), nullptr, dlogits_, nf,
                                          param(p, tensors_.wout), BT, C_, vocab_.size);
        const float* dnf = tp_.enter_backward(dnormed_, dnormed_local_, BT, C_);
        ops_.fill(dresidual_, 0.0f, residual_elements());
        norms_.begin(1);
        ops_.rmsnorm_backward(dresidual_, norms_.gradient(grad(g, tensors_.norm_final), 0), dnf, last_residual(),
                              param(p, tensors_.norm_final), rstd_final_, R_, C_);
        norms_.finish({grad(g, tensors_.norm_final)});
        access.release(unit(head_unit()));
        head_params_ = nullptr;
        access.gradients_complete(unit(head_unit()));
    }

    // BackwardPass::input leaves the seven matmuls' weight gradients to block_weights (their
    // output gradients go to the stash); the RMSNorm gains' gradients are taken at once.
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
        const float theta = static_cast<float>(config_.rope_theta);
        const std::size_t wide = rows() * static_cast<std::size_t>(Fl_);
        const std::size_t q_elements = rows() * static_cast<std::size_t>(Cl_);
        const std::size_t kv_elements = rows() * static_cast<std::size_t>(KVl_);
        float* dgate = defer ? stash->dgate : dgate_;
        float* dup = defer ? stash->dup : dup_;
        float* dq = defer ? stash->dq : dq_;
        float* dk = defer ? stash->dk : dk_;
        float* dv = defer ? stash->dv : dv_;
        norms_.begin(2);
        // dresidual_ holds d(residual3): it flows unchanged into both branches' sums.
        const float* dn2 = dnormed_;
        if (is_moe(l)) {
            // On this rank's R rows, as the forward: d(residual3) and norm2 as they are.
            ops_.fill(dnormed_, 0.0f, residual_elements());
            moe_state_->backward(*moe_layer_, moe_pack_, l, dnormed_,
                                 moe_gradients(full_layout_, g, access.gradients(experts_unit), w), dresidual_, a.moe,
                                 a.norm2, moe_weights(full_layout_, p, e, w), R_, loss_scale_);
        } else {
            const float* dmlp = tp_.leave_backward(dresidual_, dgathered_, BT, C_);
            if (defer) copy_floats(ops_, stash->dmlp, dmlp, btc);
            matmuls_.backward_overwrite_input(dwide_, weight_grad(w.wdown), nullptr, dmlp, a.glu, param(p, w.wdown), BT,
                                              Fl_, C_);
            ops_.swiglu_backward_overwrite(dgate, dup, dwide_, a.gate, a.up, wide);
            const float* n2 = tp_.enter(a.norm2, gathered_, BT, C_);
            matmuls_.backward_overwrite_input(dnormed_, weight_grad(w.wgate), nullptr, dgate, n2, param(p, w.wgate), BT,
                                              C_, Fl_);
            matmuls_.backward(dnormed_, weight_grad(w.wup), nullptr, dup, n2, param(p, w.wup), BT, C_, Fl_);
            dn2 = tp_.enter_backward(dnormed_, dnormed_local_, BT, C_);
        }
        ops_.rmsnorm_backward(dresidual_, norms_.gradient(grad(g, w.norm2), 1), dn2, a.residual2, param(p, w.norm2),
                              a.rstd2, R_, C_);
        // dresidual_ now holds d(residual2).
        const float* dattention = tp_.leave_backward(dresidual_, dgathered_, BT, C_);
        if (defer) copy_floats(ops_, stash->dattention, dattention, btc);
        if (recompute_ == Recompute::selective && keeps_probabilities()) {
            // The attention core again from the kept (rotated) Q, K and V: its probabilities
            // into the shared buffer, its output into scratch that is overwritten next.
            NvtxRange recompute_range(numbered_range_name("h", l, " recompute attention"));
            ops_.gqa_attention_forward(datty_, preatt_, a.att, a.q, a.k, a.v, gqa_);
        }
        matmuls_.backward_overwrite_input(datty_, weight_grad(w.wo), nullptr, dattention, a.atty, param(p, w.wo), BT,
                                          Cl_, C_);
        ops_.fill(dq, 0.0f, q_elements);
        ops_.fill(dk, 0.0f, kv_elements);
        ops_.fill(dv, 0.0f, kv_elements);
        if (context_)
            context_->backward(dq, dk, dv, datty_, a.atty, a.att, a.q, a.k, a.v);
        else if (sequence_)
            sequence_->backward(ops_, dq, dk, dv, sequence_workspace_, datty_, a.atty, a.att, a.q, a.k, a.v);
        else
            ops_.gqa_attention_backward(dq, dk, dv, dpreatt_, datt_, datty_, a.q, a.k, a.v, a.att, gqa_);
        ops_.rope_backward(dq, positions_.as<int>(), B_, T_, NHl_, hs_, theta);
        ops_.rope_backward(dk, positions_.as<int>(), B_, T_, NKVl_, hs_, theta);
        const float* n1 = tp_.enter(a.norm1, gathered_, BT, C_);
        matmuls_.backward_overwrite_input(dnormed_, weight_grad(w.wq), nullptr, dq, n1, param(p, w.wq), BT, C_, Cl_);
        matmuls_.backward(dnormed_, nullptr, nullptr, dk, n1, param(p, w.wk), BT, C_, KVl_);
        matmuls_.backward(dnormed_, nullptr, nullptr, dv, n1, param(p, w.wv), BT, C_, KVl_);
        if (!defer) key_value_weight_gradients(g, w, n1, dk, dv);
        const float* dn1 = tp_.enter_backward(dnormed_, dnormed_local_, BT, C_);
        ops_.rmsnorm_backward(dresidual_, norms_.gradient(grad(g, w.norm1), 0), dn1, block_input(l), param(p, w.norm1),
                              a.rstd1, R_, C_);
        norms_.finish({grad(g, w.norm1), grad(g, w.norm2)});
        // dresidual_ now holds d(residual), the previous block's output.
        if (experts_unit >= 0) {
            access.release(experts_unit);
            access.gradients_complete(experts_unit);
        }
        access.release(unit(l + 1));
        if (!defer) access.gradients_complete(unit(l + 1));
    }

    // Wk and Wv's gradients from their output gradients and the block's normed input (full
    // rows). Split: this rank's heads, whole already. Replicated: a partial sum over this
    // rank's query heads, summed over the group before it is added.
    void key_value_weight_gradients(float* g, const BlockTensors& w, const float* n1, const float* dk,
                                    const float* dv) {
        const int BT = B_ * T_;
        if (kv_split_ || tp_.size() == 1) {
            matmuls_.backward(nullptr, grad(g, w.wk), nullptr, dk, n1, nullptr, BT, C_, KVl_);
            matmuls_.backward(nullptr, grad(g, w.wv), nullptr, dv, n1, nullptr, BT, C_, KVl_);
            return;
        }
        const std::size_t n = static_cast<std::size_t>(KVl_) * C_;
        ops_.fill(kv_gradients_, 0.0f, 2 * n);
        matmuls_.backward(nullptr, kv_gradients_, nullptr, dk, n1, nullptr, BT, C_, KVl_);
        matmuls_.backward(nullptr, kv_gradients_ + n, nullptr, dv, n1, nullptr, BT, C_, KVl_);
        tp_.allreduce_sum(kv_gradients_, 2 * n);
        ops_.add_inplace(grad(g, w.wk), kv_gradients_, n);
        ops_.add_inplace(grad(g, w.wv), kv_gradients_ + n, n);
    }

    // W of a split backward. Sequence parallelism is refused with zero-bubble schedules
    // (train_options.cpp), so the kept normed inputs are whole rows here.
    void block_weights(int l, ParameterAccess& access) {
        const int BT = B_ * T_;
        if (is_moe(l)) return;  // its input pass took every weight gradient
        NvtxRange range(numbered_range_name("h", l, " weight gradients (W)"));
        access.acquire(unit(l + 1));
        float* g = access.gradients(unit(l + 1));
        const BlockTensors& w = tensors_.blocks[static_cast<std::size_t>(l)];
        const BlockActivations& a = blocks_[static_cast<std::size_t>(l)];
        const WeightGradientStash& st = stash_[static_cast<std::size_t>(l)];
        matmuls_.backward(nullptr, grad(g, w.wdown), nullptr, st.dmlp, a.glu, nullptr, BT, Fl_, C_);
        matmuls_.backward(nullptr, grad(g, w.wgate), nullptr, st.dgate, a.norm2, nullptr, BT, C_, Fl_);
        matmuls_.backward(nullptr, grad(g, w.wup), nullptr, st.dup, a.norm2, nullptr, BT, C_, Fl_);
        matmuls_.backward(nullptr, grad(g, w.wo), nullptr, st.dattention, a.atty, nullptr, BT, Cl_, C_);
        matmuls_.backward(nullptr, grad(g, w.wq), nullptr, st.dq, a.norm1, nullptr, BT, C_, Cl_);
        key_value_weight_gradients(g, w, a.norm1, st.dk, st.dv);
        access.release(unit(l + 1));
        access.gradients_complete(unit(l + 1));
    }

    void embedding_backward(int microbatch, ParameterAccess& access) {
        const int BT = B_ * T_;
        float* g = access.gradients(unit(0));
        NvtxRange range("embedding backward");
        const float* dencoded = tp_.leave_backward(dresidual_, dgathered_, BT, C_);
        ops_.encoder_backward(grad(g, tensors_.wte), nullptr, dencoded,
                              batch_.tokens(microbatch), B_, T_, C_, vocab_);
        access.gradients_complete(unit(0));
    }

    struct HeadActivations {
        float *norm_final = nullptr, *rstd_final = nullptr, *logits = nullptr, *maxes = nullptr, *sums = nullptr,
              *target_logits = nullptr;
    };
    using KeptPool = KeptActivations<BlockActivations, WeightGradientStash, HeadActivations>;
    using ActivationSlot = KeptPool::Slot;

    int unit(int global_unit) const {
        const int local = local_unit_.at(static_cast<std::size_t>(global_unit));
        if (local < 0) throw std::logic_error("Llama: unit " + std::to_string(global_unit) + " is not on this stage");
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
            norm_final_ = s.head.norm_final;
            rstd_final_ = s.head.rstd_final;
            logits_ = s.head.logits;
            maxes_ = s.head.maxes;
            sums_ = s.head.sums;
            target_logits_ = s.head.target_logits;
        }
    }

    std::vector<MatmulShape> matmul_shapes(const PipelinePart& part) const {
        const int BT = B_ * T_;
        std::vector<MatmulShape> shapes{{BT, C_, Cl_}, {BT, C_, KVl_}, {BT, Cl_, C_}, {BT, C_, Fl_}, {BT, Fl_, C_}};
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
        // (what it keeps in place of the SwiGLU's is the report's moe.memory).
        if (!is_moe(l) || config_.moe_layer_count() == L_)
            layer_activation_bytes_ = ledger_.usage().live_of(MemoryCategory::activations) - before;
        return a;
    }

    // Every buffer of a layer (the probabilities too when `with_probabilities`), with a dense
    // MLP's and/or an MoE MLP's.
    BlockActivations allocate_block_buffers(bool with_probabilities, bool dense_mlp, bool moe_mlp) {
        const std::size_t rc = residual_elements();
        const std::size_t r = static_cast<std::size_t>(R_);
        const std::size_t q_elements = rows() * static_cast<std::size_t>(Cl_);
        const std::size_t kv_elements = rows() * static_cast<std::size_t>(KVl_);
        const std::size_t wide = rows() * static_cast<std::size_t>(Fl_);
        BlockActivations a{};
        a.norm1 = arena_.floats(rc);
        a.rstd1 = arena_.floats(r);
        a.q = arena_.floats(q_elements);
        a.k = arena_.floats(kv_elements);
        a.v = arena_.floats(kv_elements);
        a.atty = arena_.floats(q_elements);
        if (with_probabilities) a.att = arena_.floats(attention_store_elements());
        a.residual2 = arena_.floats(rc);
        a.norm2 = arena_.floats(rc);
        a.rstd2 = arena_.floats(r);
        if (dense_mlp) {
            a.gate = arena_.floats(wide);
            a.up = arena_.floats(wide);
            a.glu = arena_.floats(wide);
        }
        if (moe_mlp) {
            const std::size_t before = ledger_.usage().live_of(MemoryCategory::activations);
            a.moe = moe_layer_->allocate_activations(arena_);
            moe_kept_bytes_ = ledger_.usage().live_of(MemoryCategory::activations) - before;
        }
        a.residual3 = arena_.floats(rc);
        return a;
    }

    WeightGradientStash allocate_stash() {
        const std::size_t btc = rows() * static_cast<std::size_t>(C_);
        const std::size_t wide = rows() * static_cast<std::size_t>(Fl_);
        const std::size_t q_elements = rows() * static_cast<std::size_t>(Cl_);
        const std::size_t kv_elements = rows() * static_cast<std::size_t>(KVl_);
        return WeightGradientStash{arena_.floats(btc),        arena_.floats(wide),       arena_.floats(wide),
                                   arena_.floats(btc),        arena_.floats(q_elements), arena_.floats(kv_elements),
                                   arena_.floats(kv_elements)};
    }

    void allocate_head(float*& norm_final, float*& rstd_final, float*& logits, float*& maxes, float*& sums,
                       float*& target_logits) {
        norm_final = arena_.floats(residual_elements());
        rstd_final = arena_.floats(static_cast<std::size_t>(R_));
        logits = arena_.floats(rows() * static_cast<std::size_t>(vocab_.size));
        maxes = arena_.floats(rows());
        sums = arena_.floats(rows());
        target_logits = arena_.floats(rows());
    }

    // The rank's pool (theory/pipeline/partition.hpp's activation_pool, what plan counts): layer
    // stores of each kind (dense, MoE) apart.
    void allocate_slots() {
        const std::size_t rc = residual_elements();
        for (const LayerRange& range : part_.chunks) holds_last_stage_ = holds_last_stage_ || range.end == L_;
        const std::vector<int> kinds = transformer_layer_store_kinds(config_, recompute_);
        const ActivationPool pool = activation_pool(part_, kinds);
        slots_ = KeptPool("Llama", part_.chunks, kinds);
        for (int i = 0; i < pool.slots; ++i) slots_.add_slot(arena_.floats(rc), arena_.floats(rc));
        for (std::size_t kind = 0; kind < pool.layer_stores.size(); ++kind) {
            const int layer = layer_for_store_kind(config_, kinds, static_cast<int>(kind));
            for (int i = 0; i < pool.layer_stores[kind]; ++i) {
                const BlockActivations block = allocate_block(layer);
                // An MoE layer defers nothing to W: its stores have no stash (zb-h1 refuses full
                // recompute, so the MoE layers' kind is their own there).
                slots_.add_store(static_cast<int>(kind), block,
                                 part_.split_backward && !is_moe(layer) ? allocate_stash() : WeightGradientStash{});
            }
        }
        for (int i = 0; i < pool.heads; ++i) {
            HeadActivations head;
            allocate_head(head.norm_final, head.rstd_final, head.logits, head.maxes, head.sums, head.target_logits);
            slots_.add_head(head);
        }
    }

    void allocate_activations() {
        const std::size_t btc = rows() * static_cast<std::size_t>(C_);
        const std::size_t rc = residual_elements();
        const std::size_t q_elements = rows() * static_cast<std::size_t>(Cl_);
        const std::size_t kv_elements = rows() * static_cast<std::size_t>(KVl_);
        const std::size_t wide = rows() * static_cast<std::size_t>(Fl_);
        batch_.allocate(arena_, shape_.microbatches, rows());
        if (recompute_ == Recompute::full)
            recompute_work_ = allocate_block_buffers(true, config_.moe_layer_count() < L_, config_.moe_layer_count() > 0);
        if (recompute_ == Recompute::selective && keeps_probabilities())
            recompute_work_.att = arena_.floats(gqa_.score_elements());
        if (part_.active()) {
            allocate_slots();
        } else {
            encoded_ = arena_.floats(rc);
            for (int l = 0; l < L_; ++l) blocks_.push_back(allocate_block(l));
            allocate_head(norm_final_, rstd_final_, logits_, maxes_, sums_, target_logits_);
            dresidual_ = arena_.floats(rc);
        }
        if (keeps_probabilities()) preatt_ = arena_.floats(gqa_.score_elements());
        if (sequence_) sequence_workspace_ = arena_.floats(sequence_->workspace_floats(ops_));
        projection_ = arena_.floats(btc);
        // Backward scratch, reused by every block.
        dlosses_ = arena_.floats(rows());
        dlogits_ = arena_.floats(rows() * static_cast<std::size_t>(vocab_.size));
        dnormed_ = arena_.floats(btc);
        dwide_ = arena_.floats(wide);
        dgate_ = arena_.floats(wide);
        dup_ = arena_.floats(wide);
        datty_ = arena_.floats(q_elements);
        dq_ = arena_.floats(q_elements);
        dk_ = arena_.floats(kv_elements);
        dv_ = arena_.floats(kv_elements);
        if (keeps_probabilities()) {
            dpreatt_ = arena_.floats(gqa_.score_elements());
            datt_ = arena_.floats(gqa_.score_elements());
        }
        if (!kv_split_ && tp_.size() > 1) kv_gradients_ = arena_.floats(2 * static_cast<std::size_t>(KVl_) * C_);
        norms_.allocate(arena_, 2);
        if (moe_layer_) moe_pack_.allocate(arena_, moe_layer_->shape());
        if (tp_.sequence_parallel()) {
            gathered_ = arena_.floats(btc);
            dgathered_ = arena_.floats(btc);
            projection_local_ = arena_.floats(rc);
            dnormed_local_ = arena_.floats(rc);
        }
    }

    std::size_t rows() const { return static_cast<std::size_t>(B_) * static_cast<std::size_t>(T_); }
    // What a layer keeps of its attention core: the probabilities, or ContextAttention's or
    // SequenceAttention's state.
    std::size_t attention_store_elements() const {
        return context_ ? context_->saved_floats() : sequence_ ? sequence_->saved_floats() : gqa_.score_elements();
    }
    // The standard attention: its probabilities (B,NHl,T,T) are what a layer keeps, and what
    // selective recompute shares between layers.
    bool keeps_probabilities() const { return !context_ && !sequence_; }
    const float* param(const float* unit_base, int tensor) const {
        return unit_base + full_layout_.tensor(tensor).offset_in_unit;
    }
    float* grad(float* unit_base, int tensor) const { return unit_base + full_layout_.tensor(tensor).offset_in_unit; }
    const float* last_residual() const { return blocks_.back().residual3; }
    std::size_t residual_elements() const { return static_cast<std::size_t>(R_) * static_cast<std::size_t>(C_); }

    Recompute recompute_;
    MoeContext moe_context_;
    std::unique_ptr<MoeLayer> moe_layer_;    // null without MoE layers
    std::size_t moe_scratch_bytes_ = 0;      // what it took from the ledger
    std::size_t moe_kept_bytes_ = 0;         // what one MoE layer's kept buffers took
    std::optional<MoeModelState> moe_state_;  // the MoE layers this rank holds (null without)
    bool recomputing_ = false;               // a full-recompute forward: counts nothing
    float loss_scale_ = 0.0f;                // the running backward's
    int microbatch_ = 0;                     // the running forward's
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
    int B_, T_, C_, NH_, V_, L_, hs_;
    int R_;              // rows of the norm / residual regions on this rank: B·T, or B·T/t under SP
    int Cl_, NHl_, Fl_;  // this rank's query channels, query heads and SwiGLU width
    bool kv_split_;      // key/value heads split over tp (else replicated)
    int NKVl_, KVl_;     // key/value heads and channels this rank holds
    VocabShard vocab_;
    Matmuls matmuls_;
    GqaShape gqa_;
    std::size_t layer_activation_bytes_ = 0;
    ParameterLayout full_layout_;
    ParameterLayout layout_;
    PipelinePart part_;
    std::vector<int> local_unit_;
    bool holds_last_stage_ = false;
    int first_layer_ = 0;
    KeptPool slots_{"Llama", {}, {}};  // the rank's chunks' (pipeline only)
    std::vector<WeightGradientStash> stash_;
    LlamaTensors tensors_;
    std::unique_ptr<ContextAttention> context_;
    // Block attention over the whole sequence (no context parallelism), and its workspace.
    std::optional<SequenceAttention> sequence_;
    float* sequence_workspace_ = nullptr;
    std::size_t context_workspace_bytes_ = 0;
    std::vector<int> positions_host_;  // (T) each held token's position in its sequence
    Buffer positions_;  // (T) ints: each token's position, which RoPE turns it by

    MicrobatchTokens batch_;
    const float* head_params_ = nullptr;
    float* encoded_ = nullptr;
    std::vector<BlockActivations> blocks_;
    float *preatt_ = nullptr, *projection_ = nullptr, *norm_final_ = nullptr, *rstd_final_ = nullptr;
    float *logits_ = nullptr, *maxes_ = nullptr, *sums_ = nullptr, *target_logits_ = nullptr;
    float *gathered_ = nullptr, *dgathered_ = nullptr, *projection_local_ = nullptr, *dnormed_local_ = nullptr,
          *kv_gradients_ = nullptr;
    NormGradientPack norms_{ops_, tp_, C_};  // the RMSNorms' partial sums under SP
    MoeGradientPack moe_pack_{ops_, tp_};    // the MoE layers' partial sums under SP
    float *dlosses_ = nullptr, *dlogits_ = nullptr, *dnormed_ = nullptr, *dresidual_ = nullptr;
    float *dwide_ = nullptr, *dgate_ = nullptr, *dup_ = nullptr, *datty_ = nullptr, *dq_ = nullptr, *dk_ = nullptr,
          *dv_ = nullptr, *dpreatt_ = nullptr, *datt_ = nullptr;
};

}  // namespace

std::unique_ptr<Model> make_llama_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                        Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp,
                                        const PipelinePart& part, Precision precision, Recompute recompute,
                                        const ContextGroup& cp, const MoeContext& moe, AttentionKind attention) {
    return std::make_unique<LlamaModel>(config, shape, seed, ops, ledger, tp, part, precision, recompute, cp, moe,
                                        attention);
}

}  // namespace parbench

// The Llama model over the Ops interface: the math of its embedding, blocks and head, on the
// frame it shares with gpt.cpp (transformer_model.hpp: the passes, pipeline chunks' activation
// slots, the MoE hooks) and with the same tensor-parallel operators:
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

#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "core/nvtx.hpp"
#include "theory/llama_buffers.hpp"
#include "train/models/transformer_model.hpp"
#include "train/models/transformer_parts.hpp"
#include "train/moe/moe_model_state.hpp"
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

class LlamaModel final : public TransformerModel<BlockActivations, WeightGradientStash> {
  public:
    LlamaModel(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed, Ops& ops,
               MemoryLedger& ledger, const TensorParallelGroup& tp, const PipelinePart& part, Precision precision,
               Recompute recompute, const ContextGroup& cp, const MoeContext& moe, AttentionKind attention)
        : TransformerModel(DecoderTraits{"Llama", config.ffn_hidden, /*tied_head=*/false},
                           config, shape, seed, ops, ledger, tp, part, recompute, cp, moe),
          hs_(config.hidden / config.heads), kv_split_(llama_kv_heads_split(config, tp.size())),
          NKVl_(kv_split_ ? config.kv_heads / tp.size() : config.kv_heads), KVl_(NKVl_ * hs_),
          matmuls_(ops, precision, ledger, matmul_shapes(llama_block_matmul_shapes(config, tp.size(), rows()))) {
        tensors_ = llama_layout::build(config, tp.split(), full_layout_, expert_split(moe));
        select_units();
        // Query head h of this rank is global head rank·NHl + h; with split key/value heads
        // the local numbering starts at 0 in both, with replicated ones the global is kept.
        const GqaShape gqa{B_, T_, NHl_, NKVl_, hs_, kv_split_ ? 0 : tp.rank() * NHl_, config.heads / config.kv_heads};
        make_attention(cp, attention, gqa, static_cast<int>(gqa.q_width()), static_cast<int>(gqa.kv_width()));
        if (config.moe) make_moe_layer(matmuls_);
        allocate_activations();
        if (context_) {
            positions_host_ = context_positions(shape.seq_len, cp.split);
        } else {
            positions_host_.resize(static_cast<std::size_t>(T_));
            std::iota(positions_host_.begin(), positions_host_.end(), 0);
        }
        positions_ = arena_.buffer(scratch_buffers().positions * sizeof(int));
        device_.copy_from_host(positions_, positions_host_.data(), positions_host_.size() * sizeof(int));
    }

  private:
    // Llama has no position embedding, and its head is a unit of its own: the embedding's unit
    // is released whatever `keep_for_head` says.
    void embedding_forward(int microbatch, ParameterAccess& access, bool /*keep_for_head*/) override {
        const int BT = B_ * T_;
        NvtxRange range("embedding forward");
        const float* p = access.acquire(unit(0));
        // Vocab-parallel embedding: each rank looks up its shard's tokens (zero for the
        // others), then the partial sums are reduced.
        float* partial = tp_.sequence_parallel() ? gathered_ : encoded_;
        ops_.encoder_forward(partial, batch_.tokens(microbatch), param(p, tensors_.wte),
                             nullptr, B_, T_, C_, vocab_);
        tp_.leave(partial, encoded_, BT, C_);
        access.release(unit(0));
    }

    void block_forward_compute(int l, const float* p, const float* e) override {
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
            moe_mlp_forward(l, p, e, w, a.moe, a.norm2);
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

    void head_forward(int microbatch, ParameterAccess& access) override {
        const int BT = B_ * T_;
        NvtxRange range("head forward");
        pass_.head_params = access.acquire(unit(head_unit()));
        const float* p = pass_.head_params;
        ops_.rmsnorm_forward(head_.norm, head_.rstd, last_residual(), param(p, tensors_.norm_final), R_, C_,
                             static_cast<float>(config_.norm_eps));
        const float* nf = tp_.enter(head_.norm, gathered_, BT, C_);
        matmuls_.forward(head_.logits, nf, param(p, tensors_.wout), nullptr, BT, C_, vocab_.size);
        cross_entropy_forward(microbatch);
    }

    void head_backward(int microbatch, float loss_scale, ParameterAccess& access) override {
        const int BT = B_ * T_;
        float* g = access.gradients(unit(head_unit()));
        NvtxRange range("head backward");
        const float* p = pass_.head_params != nullptr ? pass_.head_params : access.acquire(unit(head_unit()));
        cross_entropy_backward(microbatch, loss_scale);
        const float* nf = tp_.enter(head_.norm, gathered_, BT, C_);
        matmuls_.backward_overwrite_input(dnormed_, grad(g, tensors_.wout), nullptr, dlogits_, nf,
                                          param(p, tensors_.wout), BT, C_, vocab_.size);
        const float* dnf = tp_.enter_backward(dnormed_, dnormed_local_, BT, C_);
        ops_.fill(dresidual_, 0.0f, residual_elements());
        norms_.begin(1);
        ops_.rmsnorm_backward(dresidual_, norms_.gradient(grad(g, tensors_.norm_final), 0), dnf, last_residual(),
                              param(p, tensors_.norm_final), head_.rstd, R_, C_);
        norms_.finish({grad(g, tensors_.norm_final)});
        access.release(unit(head_unit()));
        pass_.head_params = nullptr;
    }

    // Deferred (split backward's B): the seven matmuls' weight gradients, their output
    // gradients kept in the stash; the RMSNorm gains' gradients are taken at once.
    void block_backward_compute(int l, const BlockUnits& u, bool defer, ParameterAccess& access) override {
        const int BT = B_ * T_;
        const std::size_t btc = rows() * static_cast<std::size_t>(C_);
        const float* p = u.params;
        float* g = u.grads;
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
            moe_mlp_backward(l, u, w, a.moe, a.norm2, access);
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

    // The kept normed inputs are whole rows here (no SP with a split backward).
    void block_weights_compute(int l, const float* /*p*/, float* g) override {
        const int BT = B_ * T_;
        const BlockTensors& w = tensors_.blocks[static_cast<std::size_t>(l)];
        const BlockActivations& a = blocks_[static_cast<std::size_t>(l)];
        const WeightGradientStash& st = stash_[static_cast<std::size_t>(l)];
        matmuls_.backward(nullptr, grad(g, w.wdown), nullptr, st.dmlp, a.glu, nullptr, BT, Fl_, C_);
        matmuls_.backward(nullptr, grad(g, w.wgate), nullptr, st.dgate, a.norm2, nullptr, BT, C_, Fl_);
        matmuls_.backward(nullptr, grad(g, w.wup), nullptr, st.dup, a.norm2, nullptr, BT, C_, Fl_);
        matmuls_.backward(nullptr, grad(g, w.wo), nullptr, st.dattention, a.atty, nullptr, BT, Cl_, C_);
        matmuls_.backward(nullptr, grad(g, w.wq), nullptr, st.dq, a.norm1, nullptr, BT, C_, Cl_);
        key_value_weight_gradients(g, w, a.norm1, st.dk, st.dv);
    }

    void embedding_backward(int microbatch, ParameterAccess& access) override {
        const int BT = B_ * T_;
        float* g = access.gradients(unit(0));
        NvtxRange range("embedding backward");
        const float* dencoded = tp_.leave_backward(dresidual_, dgathered_, BT, C_);
        ops_.encoder_backward(grad(g, tensors_.wte), nullptr, dencoded,
                              batch_.tokens(microbatch), B_, T_, C_, vocab_);
        access.gradients_complete(unit(0));
    }

    // The layer's buffers from the table the memory theory sums (theory/llama_buffers.hpp).
    BlockActivations allocate_block_buffers(bool with_probabilities, bool dense_mlp, bool moe_mlp) override {
        const LlamaBlockBuffers sizes = llama_block_buffers(config_, tp_.size(), rows(), static_cast<std::size_t>(R_));
        BlockActivations a{};
        a.norm1 = arena_.floats(sizes.norm1);
        a.rstd1 = arena_.floats(sizes.rstd1);
        a.q = arena_.floats(sizes.q);
        a.k = arena_.floats(sizes.k);
        a.v = arena_.floats(sizes.v);
        a.atty = arena_.floats(sizes.atty);
        if (with_probabilities) a.att = arena_.floats(attention_store_elements());
        a.residual2 = arena_.floats(sizes.residual2);
        a.norm2 = arena_.floats(sizes.norm2);
        a.rstd2 = arena_.floats(sizes.rstd2);
        if (dense_mlp) {
            a.gate = arena_.floats(sizes.gate);
            a.up = arena_.floats(sizes.up);
            a.glu = arena_.floats(sizes.glu);
        }
        if (moe_mlp) a.moe = allocate_moe_activations();
        a.residual3 = arena_.floats(sizes.residual3);
        return a;
    }

    WeightGradientStash allocate_stash() override {
        const LlamaStashBuffers sizes = llama_stash_buffers(config_, tp_.size(), rows());
        return WeightGradientStash{arena_.floats(sizes.dmlp),       arena_.floats(sizes.dgate), arena_.floats(sizes.dup),
                                   arena_.floats(sizes.dattention), arena_.floats(sizes.dq),    arena_.floats(sizes.dk),
                                   arena_.floats(sizes.dv)};
    }

    // The layers' scratch from the table the memory theory sums (theory/llama_buffers.hpp).
    LlamaScratchBuffers scratch_buffers() const {
        return llama_scratch_buffers(config_, tp_.size(), rows(), static_cast<std::size_t>(T_));
    }

    void allocate_block_scratch() override {
        const LlamaScratchBuffers sizes = scratch_buffers();
        dgate_ = arena_.floats(sizes.dgate);
        dup_ = arena_.floats(sizes.dup);
        datty_ = arena_.floats(sizes.datty);
        dq_ = arena_.floats(sizes.dq);
        dk_ = arena_.floats(sizes.dk);
        dv_ = arena_.floats(sizes.dv);
        kv_gradients_ = arena_.floats_or_null(sizes.kv_gradients);
    }

    int hs_;             // head size
    bool kv_split_;      // key/value heads split over tp (else replicated)
    int NKVl_, KVl_;     // key/value heads and channels this rank holds
    Matmuls matmuls_;    // every linear layer, in the run's precision
    LlamaTensors tensors_;
    Buffer positions_;   // (T) ints: each token's position, which RoPE turns it by
    float *dgate_ = nullptr, *dup_ = nullptr, *datty_ = nullptr, *dq_ = nullptr, *dk_ = nullptr, *dv_ = nullptr;
    float* kv_gradients_ = nullptr;  // (2, KVl, C): replicated Wk and Wv's partial gradients
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

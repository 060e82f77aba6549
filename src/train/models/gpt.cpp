// The GPT model over the Ops interface: the math of its embedding (with learned positions),
// blocks (LayerNorm, fused-QKV attention, a GELU MLP) and tied head, on the frame it shares
// with llama.cpp (transformer_model.hpp: the passes, pipeline chunks' activation slots, the MoE
// hooks).
//
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

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/nvtx.hpp"
#include "theory/gpt_buffers.hpp"
#include "train/models/transformer_model.hpp"
#include "train/models/transformer_parts.hpp"
#include "train/moe/moe_model_state.hpp"
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

class GptModel final : public TransformerModel<BlockActivations, WeightGradientStash> {
  public:
    GptModel(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed, Ops& ops,
             MemoryLedger& ledger, const TensorParallelGroup& tp, const PipelinePart& part, Precision precision,
             Recompute recompute, const ContextGroup& cp, const MoeContext& moe, AttentionKind attention)
        : TransformerModel(DecoderTraits{"GPT", 4 * config.hidden, /*tied_head=*/true},
                           config, shape, seed, ops, ledger, tp, part, recompute, cp, moe),
          matmuls_(ops, precision, ledger,
                   matmul_shapes(gpt_block_matmul_shapes(config, tp.size(), rows(), cp.active()))) {
        tensors_ = gpt_layout::build(config, shape.seq_len, tp.split(), full_layout_, expert_split(moe));
        select_units();
        make_attention(cp, attention, GqaShape{B_, T_, NHl_, NHl_, C_ / NH_, 0, 1}, 3 * Cl_, 3 * Cl_);
        if (cp.active()) {
            positions_host_ = context_positions(shape.seq_len, cp.split);
            // Contiguous runs of positions (one per chunk): wpe rows are gathered by run.
            for (int i = 0; i < T_; ++i) {
                const int position = positions_host_[static_cast<std::size_t>(i)];
                if (position_runs_.empty() || position_runs_.back().first + position_runs_.back().length != position)
                    position_runs_.push_back(PositionRun{position, 0, i});
                ++position_runs_.back().length;
            }
        }
        if (config.moe) make_moe_layer(matmuls_);
        allocate_activations();
    }

    // The embedding unit, acquired by the encoder, stays held through the blocks for the tied
    // head and into backward (one gather per step, as FSDP's root unit): the held embedding and
    // the block being computed (a pipeline stage holds one at a time).
    int parameter_units_held_at_once() const override { return part_.active() ? 1 : 2; }

  private:
    // `keep_for_head`: leave unit 0 acquired for head_forward (the tied output projection).
    void embedding_forward(int microbatch, ParameterAccess& access, bool keep_for_head) override {
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
            pass_.head_params = p;
        else
            access.release(unit(0));
    }

    void block_forward_compute(int l, const float* p, const float* e) override {
        const int BT = B_ * T_;
        const BlockTensors& w = tensors_.blocks[static_cast<std::size_t>(l)];
        const BlockActivations& a = blocks_[static_cast<std::size_t>(l)];
        const float* residual = block_input(l);
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
            moe_mlp_forward(l, p, e, w, a.moe, a.ln2);
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

    void head_forward(int microbatch, ParameterAccess& access) override {
        const int BT = B_ * T_;
        NvtxRange range("head forward");
        if (pass_.head_params == nullptr) pass_.head_params = access.acquire(unit(0));
        const float* p = pass_.head_params;
        const EmbeddingTensors& e = tensors_.embedding;
        ops_.layernorm_forward(head_.norm, head_.mean, head_.rstd, last_residual(), param(p, e.lnfw),
                               param(p, e.lnfb), R_, C_);
        const float* lnf = tp_.enter(head_.norm, gathered_, BT, C_);
        matmuls_.forward(head_.logits, lnf, param(p, e.wte), nullptr, BT, C_, vocab_.size);
        cross_entropy_forward(microbatch);
    }

    void head_backward(int microbatch, float loss_scale, ParameterAccess& access) override {
        const int BT = B_ * T_;
        const EmbeddingTensors& e = tensors_.embedding;
        float* embedding_grads = access.gradients(unit(0));
        NvtxRange range("head backward");
        // Acquired by forward's head and kept, unless a pipeline ran other micro-batches since.
        const float* p = pass_.head_params != nullptr ? pass_.head_params : access.acquire(unit(0));
        cross_entropy_backward(microbatch, loss_scale);
        // SP keeps only token chunks; a split region's input is gathered again for its
        // weight gradient (arXiv 2205.05198 sec. 4.2.2), here and in every block.
        const float* lnf = tp_.enter(head_.norm, gathered_, BT, C_);
        matmuls_.backward_overwrite_input(dnormed_, grad(embedding_grads, e.wte), nullptr, dlogits_, lnf,
                                          param(p, e.wte), BT, C_, vocab_.size);
        const float* dlnf = tp_.enter_backward(dnormed_, dnormed_local_, BT, C_);
        ops_.fill(dresidual_, 0.0f, residual_elements());
        norms_.begin(2);
        ops_.layernorm_backward(dresidual_, norms_.gradient(grad(embedding_grads, e.lnfw), 0),
                                norms_.gradient(grad(embedding_grads, e.lnfb), 1), dlnf, last_residual(),
                                param(p, e.lnfw), head_.mean, head_.rstd, R_, C_);
        norms_.finish({grad(embedding_grads, e.lnfw), grad(embedding_grads, e.lnfb)});
        access.release(unit(0));
        pass_.head_params = nullptr;
    }

    // Deferred (split backward's B): the four matmuls' weight gradients, their output
    // gradients kept in the stash; the LayerNorms' small gradients are taken at once.
    void block_backward_compute(int l, const BlockUnits& u, bool defer, ParameterAccess& access) override {
        const int BT = B_ * T_;
        const std::size_t btc = rows() * static_cast<std::size_t>(C_);
        const float* p = u.params;
        float* g = u.grads;
        const BlockTensors& w = tensors_.blocks[static_cast<std::size_t>(l)];
        const BlockActivations& a = blocks_[static_cast<std::size_t>(l)];
        const WeightGradientStash* stash = defer ? &stash_[static_cast<std::size_t>(l)] : nullptr;
        auto weight_grad = [&](int tensor) { return defer ? nullptr : grad(g, tensor); };
        const float* residual = block_input(l);
        const std::size_t wide = rows() * static_cast<std::size_t>(Fl_);
        const std::size_t local_channels = rows() * static_cast<std::size_t>(Cl_);
        float* dwide2 = defer ? stash->dfc : dwide2_;
        float* dqkv = defer ? stash->dqkv : dqkv_;
        norms_.begin(4);
        // dresidual_ holds d(residual3): it flows unchanged into both branches' sums.
        const float* dln2 = dnormed_;
        if (is_moe(l)) {
            moe_mlp_backward(l, u, w, a.moe, a.ln2, access);
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
    }

    void block_weights_compute(int l, const float* p, float* g) override {
        const int BT = B_ * T_;
        const BlockTensors& w = tensors_.blocks[static_cast<std::size_t>(l)];
        const BlockActivations& a = blocks_[static_cast<std::size_t>(l)];
        const WeightGradientStash& st = stash_[static_cast<std::size_t>(l)];
        matmuls_.backward(nullptr, grad(g, w.fcprojw), grad(g, w.fcprojb), st.dmlp, a.fch_gelu, param(p, w.fcprojw),
                          BT, Fl_, C_);
        matmuls_.backward(nullptr, grad(g, w.fcw), grad(g, w.fcb), st.dfc, a.ln2, param(p, w.fcw), BT, C_, Fl_);
        matmuls_.backward(nullptr, grad(g, w.attprojw), grad(g, w.attprojb), st.dattention, a.atty,
                          param(p, w.attprojw), BT, Cl_, C_);
        qkv_backward(nullptr, grad(g, w.qkvw), grad(g, w.qkvb), st.dqkv, a.ln1, param(p, w.qkvw));
    }

    void embedding_backward(int microbatch, ParameterAccess& access) override {
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

    // A whole term (row-parallel bias) that the group's rank 0 alone adds.
    const float* replicated_term(const float* unit_base, int tensor) const {
        return tp_.adds_replicated_terms() ? param(unit_base, tensor) : nullptr;
    }

    // The layer's buffers from the table the memory theory sums (theory/gpt_buffers.hpp).
    BlockActivations allocate_block_buffers(bool with_probabilities, bool dense_mlp, bool moe_mlp) override {
        const GptBlockBuffers sizes = gpt_block_buffers(config_, tp_.size(), rows(), static_cast<std::size_t>(R_));
        BlockActivations a{};
        a.ln1 = arena_.floats(sizes.ln1);
        a.ln1_mean = arena_.floats(sizes.ln1_mean);
        a.ln1_rstd = arena_.floats(sizes.ln1_rstd);
        a.qkv = arena_.floats(sizes.qkv);
        a.atty = arena_.floats(sizes.atty);
        if (with_probabilities) a.att = arena_.floats(attention_store_elements());
        a.residual2 = arena_.floats(sizes.residual2);
        a.ln2 = arena_.floats(sizes.ln2);
        a.ln2_mean = arena_.floats(sizes.ln2_mean);
        a.ln2_rstd = arena_.floats(sizes.ln2_rstd);
        if (dense_mlp) {
            a.fch = arena_.floats(sizes.fch);
            a.fch_gelu = arena_.floats(sizes.fch_gelu);
        }
        if (moe_mlp) a.moe = allocate_moe_activations();
        a.residual3 = arena_.floats(sizes.residual3);
        return a;
    }

    WeightGradientStash allocate_stash() override {
        const GptStashBuffers sizes = gpt_stash_buffers(config_, tp_.size(), rows());
        return WeightGradientStash{arena_.floats(sizes.dmlp), arena_.floats(sizes.dfc), arena_.floats(sizes.dattention),
                                   arena_.floats(sizes.dqkv)};
    }

    // The layers' scratch from the table the memory theory sums (theory/gpt_buffers.hpp).
    void allocate_block_scratch() override {
        const GptScratchBuffers sizes =
            gpt_scratch_buffers(config_, tp_.size(), rows(), static_cast<std::size_t>(T_), context_ != nullptr);
        dwide2_ = arena_.floats(sizes.dfc);
        datty_ = arena_.floats(sizes.datty);
        dqkv_ = arena_.floats(sizes.dqkv);
        wpe_local_ = arena_.floats_or_null(sizes.positions);
        dwpe_local_ = arena_.floats_or_null(sizes.dpositions);
    }

    Matmuls matmuls_;  // every linear layer, in the run's precision
    GptTensors tensors_;
    // Context parallelism only: the runs of consecutive positions (`length` tokens from
    // position `first`, local index `local`), and wpe's rows of them with their gradient.
    struct PositionRun {
        int first = 0, length = 0, local = 0;
    };
    std::vector<PositionRun> position_runs_;
    float *wpe_local_ = nullptr, *dwpe_local_ = nullptr;  // (T,C)
    float *dwide2_ = nullptr, *datty_ = nullptr, *dqkv_ = nullptr;
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

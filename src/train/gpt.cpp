#include "train/gpt.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "bench/nvtx.hpp"
#include "train/synthetic_data.hpp"

namespace parbench {
namespace {

// GPT-2's initialisation: N(0, 0.02), the residual projections scaled by 1/sqrt(2L)
// (Radford et al. 2019 sec. 2.3); LayerNorm weight 1, biases 0.
constexpr float init_stddev = 0.02f;

// Tensor indices of one block, in layout order (llm.c's order).
struct BlockTensors {
    int ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

struct EmbeddingTensors {
    int wte, wpe, lnfw, lnfb;
};

struct GptTensors {
    EmbeddingTensors embedding;
    std::vector<BlockTensors> blocks;
};

GptTensors build_layout(const ModelConfig& config, int seq_len, ParameterLayout& layout) {
    const int C = config.hidden;
    const float residual_stddev = init_stddev / std::sqrt(2.0f * static_cast<float>(config.layers));
    GptTensors tensors;
    layout.add_unit("embedding");
    tensors.embedding.wte = layout.add_tensor("wte", {config.vocab, C}, InitKind::normal, init_stddev);
    tensors.embedding.wpe = layout.add_tensor("wpe", {seq_len, C}, InitKind::normal, init_stddev);
    tensors.embedding.lnfw = layout.add_tensor("lnfw", {C}, InitKind::ones);
    tensors.embedding.lnfb = layout.add_tensor("lnfb", {C}, InitKind::zeros);
    for (int l = 0; l < config.layers; ++l) {
        const std::string p = "h" + std::to_string(l) + ".";
        layout.add_unit("h" + std::to_string(l));
        BlockTensors b{};
        b.ln1w = layout.add_tensor(p + "ln1w", {C}, InitKind::ones);
        b.ln1b = layout.add_tensor(p + "ln1b", {C}, InitKind::zeros);
        b.qkvw = layout.add_tensor(p + "qkvw", {3 * C, C}, InitKind::normal, init_stddev);
        b.qkvb = layout.add_tensor(p + "qkvb", {3 * C}, InitKind::zeros);
        b.attprojw = layout.add_tensor(p + "attprojw", {C, C}, InitKind::normal, residual_stddev);
        b.attprojb = layout.add_tensor(p + "attprojb", {C}, InitKind::zeros);
        b.ln2w = layout.add_tensor(p + "ln2w", {C}, InitKind::ones);
        b.ln2b = layout.add_tensor(p + "ln2b", {C}, InitKind::zeros);
        b.fcw = layout.add_tensor(p + "fcw", {4 * C, C}, InitKind::normal, init_stddev);
        b.fcb = layout.add_tensor(p + "fcb", {4 * C}, InitKind::zeros);
        b.fcprojw = layout.add_tensor(p + "fcprojw", {C, 4 * C}, InitKind::normal, residual_stddev);
        b.fcprojb = layout.add_tensor(p + "fcprojb", {C}, InitKind::zeros);
        tensors.blocks.push_back(b);
    }
    return tensors;
}

// The model's activation buffers, allocated once from the ledger and owned together.
class ActivationArena {
  public:
    explicit ActivationArena(MemoryLedger& ledger) : ledger_(ledger) {}
    Buffer buffer(std::size_t bytes) {
        buffers_.push_back(ledger_.allocate(MemoryCategory::activations, bytes));
        return buffers_.back();
    }
    float* floats(std::size_t count) { return buffer(count * sizeof(float)).as<float>(); }

  private:
    MemoryLedger& ledger_;
    std::vector<Buffer> buffers_;
};

// What one block keeps from forward for backward, (B,T,...) each.
struct BlockActivations {
    float* ln1;       // (B,T,C)
    float* ln1_mean;  // (B,T)
    float* ln1_rstd;  // (B,T)
    float* qkv;       // (B,T,3C)
    float* atty;      // (B,T,C)
    float* att;       // (B,NH,T,T)
    float* residual2; // (B,T,C)
    float* ln2;
    float* ln2_mean;
    float* ln2_rstd;
    float* fch;       // (B,T,4C)
    float* fch_gelu;  // (B,T,4C)
    float* residual3; // (B,T,C)
};

class GptModel : public Model {
  public:
    GptModel(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed, Ops& ops,
             MemoryLedger& ledger)
        : config_(config), shape_(shape), seed_(seed), ops_(ops), device_(ledger.device()), arena_(ledger),
          B_(shape.batch), T_(shape.seq_len), C_(config.hidden), NH_(config.heads), V_(config.vocab),
          L_(config.layers) {
        tensors_ = build_layout(config, shape.seq_len, layout_);
        allocate_activations();
    }

    const ParameterLayout& layout() const override { return layout_; }

    std::vector<int> parameter_use_order() const override {
        std::vector<int> order{0};                            // encoder
        for (int l = 1; l <= L_; ++l) order.push_back(l);     // blocks
        order.push_back(0);                                   // final LN + logits, kept into backward
        for (int l = L_; l >= 1; --l) order.push_back(l);     // blocks, backward
        return order;                                         // (encoder backward needs no weights)
    }

    void stage_batch(int microbatch, std::uint64_t first_sample) override {
        const std::size_t n = rows();
        std::vector<int> tokens(n), targets(n);
        synthetic_tokens(seed_, first_sample, B_, T_, V_, tokens, targets);
        Buffer& slot_tokens = tokens_[static_cast<std::size_t>(microbatch)];
        Buffer& slot_targets = targets_[static_cast<std::size_t>(microbatch)];
        device_.copy_from_host(slot_tokens, tokens.data(), n * sizeof(int));
        device_.copy_from_host(slot_targets, targets.data(), n * sizeof(int));
    }

    void forward(int microbatch, ParameterAccess& access) override {
        const int BT = B_ * T_;
        const int* tokens = tokens_[static_cast<std::size_t>(microbatch)].as<int>();
        {
            NvtxRange range("embedding forward");
            const float* p = access.acquire(0);
            ops_.encoder_forward(encoded_, tokens, param(p, tensors_.embedding.wte), param(p, tensors_.embedding.wpe),
                                 B_, T_, C_);
            access.release(0);
        }
        for (int l = 0; l < L_; ++l) {
            NvtxRange range("h" + std::to_string(l) + " forward");
            const float* p = access.acquire(l + 1);
            const BlockTensors& w = tensors_.blocks[static_cast<std::size_t>(l)];
            const BlockActivations& a = blocks_[static_cast<std::size_t>(l)];
            const float* residual = l == 0 ? encoded_ : blocks_[static_cast<std::size_t>(l - 1)].residual3;
            ops_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, residual, param(p, w.ln1w), param(p, w.ln1b), BT, C_);
            ops_.matmul_forward(a.qkv, a.ln1, param(p, w.qkvw), param(p, w.qkvb), BT, C_, 3 * C_);
            ops_.attention_forward(a.atty, preatt_, a.att, a.qkv, B_, T_, C_, NH_);
            ops_.matmul_forward(projection_, a.atty, param(p, w.attprojw), param(p, w.attprojb), BT, C_, C_);
            ops_.residual_forward(a.residual2, residual, projection_, rows() * C_);
            ops_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, param(p, w.ln2w), param(p, w.ln2b), BT,
                                   C_);
            ops_.matmul_forward(a.fch, a.ln2, param(p, w.fcw), param(p, w.fcb), BT, C_, 4 * C_);
            ops_.gelu_forward(a.fch_gelu, a.fch, rows() * 4 * C_);
            ops_.matmul_forward(projection_, a.fch_gelu, param(p, w.fcprojw), param(p, w.fcprojb), BT, 4 * C_, C_);
            ops_.residual_forward(a.residual3, a.residual2, projection_, rows() * C_);
            access.release(l + 1);
        }
        NvtxRange range("head forward");
        head_params_ = access.acquire(0);
        const float* p = head_params_;
        const EmbeddingTensors& e = tensors_.embedding;
        ops_.layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, last_residual(), param(p, e.lnfw), param(p, e.lnfb), BT, C_);
        ops_.matmul_forward(logits_, lnf_, param(p, e.wte), nullptr, BT, C_, V_);
        ops_.crossentropy_forward(loss_buffers_[static_cast<std::size_t>(microbatch)].as<float>(), probs_, logits_,
                                  targets_[static_cast<std::size_t>(microbatch)].as<int>(), BT, V_);
    }

    void backward(int microbatch, float loss_scale, ParameterAccess& access) override {
        const int BT = B_ * T_;
        const std::size_t btc = rows() * static_cast<std::size_t>(C_);
        const EmbeddingTensors& e = tensors_.embedding;
        float* embedding_grads = access.gradients(0);
        {
            NvtxRange range("head backward");
            const float* p = head_params_;  // acquired by forward's head
            ops_.fill(dlosses_, loss_scale, rows());
            ops_.fill(dlogits_, 0.0f, rows() * static_cast<std::size_t>(V_));
            ops_.crossentropy_backward(dlogits_, dlosses_, probs_, targets_[static_cast<std::size_t>(microbatch)].as<int>(),
                                       BT, V_);
            ops_.fill(dnormed_, 0.0f, btc);
            ops_.matmul_backward(dnormed_, grad(embedding_grads, e.wte), nullptr, dlogits_, lnf_, param(p, e.wte), BT,
                                 C_, V_);
            ops_.fill(dresidual_, 0.0f, btc);
            ops_.layernorm_backward(dresidual_, grad(embedding_grads, e.lnfw), grad(embedding_grads, e.lnfb), dnormed_,
                                    last_residual(), param(p, e.lnfw), lnf_mean_, lnf_rstd_, BT, C_);
            access.release(0);
            head_params_ = nullptr;
        }
        for (int l = L_ - 1; l >= 0; --l) {
            NvtxRange range("h" + std::to_string(l) + " backward");
            const float* p = access.acquire(l + 1);
            float* g = access.gradients(l + 1);
            const BlockTensors& w = tensors_.blocks[static_cast<std::size_t>(l)];
            const BlockActivations& a = blocks_[static_cast<std::size_t>(l)];
            const float* residual = l == 0 ? encoded_ : blocks_[static_cast<std::size_t>(l - 1)].residual3;
            // dresidual_ holds d(residual3): it flows unchanged into both branches' sums.
            ops_.fill(dwide_, 0.0f, 4 * btc);
            ops_.matmul_backward(dwide_, grad(g, w.fcprojw), grad(g, w.fcprojb), dresidual_, a.fch_gelu,
                                 param(p, w.fcprojw), BT, 4 * C_, C_);
            ops_.fill(dwide2_, 0.0f, 4 * btc);
            ops_.gelu_backward(dwide2_, a.fch, dwide_, 4 * btc);
            ops_.fill(dnormed_, 0.0f, btc);
            ops_.matmul_backward(dnormed_, grad(g, w.fcw), grad(g, w.fcb), dwide2_, a.ln2, param(p, w.fcw), BT, C_,
                                 4 * C_);
            ops_.layernorm_backward(dresidual_, grad(g, w.ln2w), grad(g, w.ln2b), dnormed_, a.residual2,
                                    param(p, w.ln2w), a.ln2_mean, a.ln2_rstd, BT, C_);
            // dresidual_ now holds d(residual2).
            ops_.fill(datty_, 0.0f, btc);
            ops_.matmul_backward(datty_, grad(g, w.attprojw), grad(g, w.attprojb), dresidual_, a.atty,
                                 param(p, w.attprojw), BT, C_, C_);
            ops_.fill(dqkv_, 0.0f, 3 * btc);
            ops_.attention_backward(dqkv_, dpreatt_, datt_, datty_, a.qkv, a.att, B_, T_, C_, NH_);
            ops_.fill(dnormed_, 0.0f, btc);
            ops_.matmul_backward(dnormed_, grad(g, w.qkvw), grad(g, w.qkvb), dqkv_, a.ln1, param(p, w.qkvw), BT, C_,
                                 3 * C_);
            ops_.layernorm_backward(dresidual_, grad(g, w.ln1w), grad(g, w.ln1b), dnormed_, residual, param(p, w.ln1w),
                                    a.ln1_mean, a.ln1_rstd, BT, C_);
            // dresidual_ now holds d(residual), the previous block's output.
            access.release(l + 1);
            access.gradients_complete(l + 1);
        }
        NvtxRange range("embedding backward");
        ops_.encoder_backward(grad(embedding_grads, e.wte), grad(embedding_grads, e.wpe), dresidual_,
                              tokens_[static_cast<std::size_t>(microbatch)].as<int>(), B_, T_, C_);
        access.gradients_complete(0);
    }

    double mean_loss(int microbatch) const override {
        std::vector<float> losses(rows());
        device_.copy_to_host(losses.data(), loss_buffers_[static_cast<std::size_t>(microbatch)],
                             losses.size() * sizeof(float));
        double sum = 0.0;
        for (float loss : losses) sum += loss;
        return sum / static_cast<double>(losses.size());
    }

  private:
    std::size_t rows() const { return static_cast<std::size_t>(B_) * static_cast<std::size_t>(T_); }
    const float* param(const float* unit_base, int tensor) const {
        return unit_base + layout_.tensor(tensor).offset_in_unit;
    }
    float* grad(float* unit_base, int tensor) const { return unit_base + layout_.tensor(tensor).offset_in_unit; }
    const float* last_residual() const { return blocks_.back().residual3; }

    void allocate_activations() {
        const std::size_t btc = rows() * static_cast<std::size_t>(C_);
        const std::size_t att = static_cast<std::size_t>(B_) * NH_ * T_ * T_;
        const auto m = static_cast<std::size_t>(shape_.microbatches);
        for (std::size_t k = 0; k < m; ++k) {
            tokens_.push_back(arena_.buffer(rows() * sizeof(int)));
            targets_.push_back(arena_.buffer(rows() * sizeof(int)));
            loss_buffers_.push_back(arena_.buffer(rows() * sizeof(float)));
        }
        encoded_ = arena_.floats(btc);
        for (int l = 0; l < L_; ++l) {
            BlockActivations a{};
            a.ln1 = arena_.floats(btc);
            a.ln1_mean = arena_.floats(rows());
            a.ln1_rstd = arena_.floats(rows());
            a.qkv = arena_.floats(3 * btc);
            a.atty = arena_.floats(btc);
            a.att = arena_.floats(att);
            a.residual2 = arena_.floats(btc);
            a.ln2 = arena_.floats(btc);
            a.ln2_mean = arena_.floats(rows());
            a.ln2_rstd = arena_.floats(rows());
            a.fch = arena_.floats(4 * btc);
            a.fch_gelu = arena_.floats(4 * btc);
            a.residual3 = arena_.floats(btc);
            blocks_.push_back(a);
        }
        preatt_ = arena_.floats(att);
        projection_ = arena_.floats(btc);
        lnf_ = arena_.floats(btc);
        lnf_mean_ = arena_.floats(rows());
        lnf_rstd_ = arena_.floats(rows());
        logits_ = arena_.floats(rows() * static_cast<std::size_t>(V_));
        probs_ = arena_.floats(rows() * static_cast<std::size_t>(V_));
        // Backward scratch, reused by every block (llm.c's CUDA trainer does the same).
        dlosses_ = arena_.floats(rows());
        dlogits_ = arena_.floats(rows() * static_cast<std::size_t>(V_));
        dnormed_ = arena_.floats(btc);
        dresidual_ = arena_.floats(btc);
        dwide_ = arena_.floats(4 * btc);
        dwide2_ = arena_.floats(4 * btc);
        datty_ = arena_.floats(btc);
        dqkv_ = arena_.floats(3 * btc);
        dpreatt_ = arena_.floats(att);
        datt_ = arena_.floats(att);
    }

    ModelConfig config_;
    MicrobatchShape shape_;
    std::uint64_t seed_;
    Ops& ops_;
    Device& device_;
    ActivationArena arena_;
    int B_, T_, C_, NH_, V_, L_;
    ParameterLayout layout_;
    GptTensors tensors_;

    std::vector<Buffer> tokens_, targets_, loss_buffers_;  // one slot per micro-batch
    const float* head_params_ = nullptr;  // unit 0, acquired by forward's head, released by backward's
    float* encoded_ = nullptr;
    std::vector<BlockActivations> blocks_;
    float *preatt_ = nullptr, *projection_ = nullptr, *lnf_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
    float *logits_ = nullptr, *probs_ = nullptr;
    float *dlosses_ = nullptr, *dlogits_ = nullptr, *dnormed_ = nullptr, *dresidual_ = nullptr;
    float *dwide_ = nullptr, *dwide2_ = nullptr, *datty_ = nullptr, *dqkv_ = nullptr, *dpreatt_ = nullptr,
          *datt_ = nullptr;
};

}  // namespace

ParameterLayout gpt_parameter_layout(const ModelConfig& config, int seq_len) {
    ParameterLayout layout;
    build_layout(config, seq_len, layout);
    return layout;
}

std::unique_ptr<Model> make_gpt_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                      Ops& ops, MemoryLedger& ledger) {
    return std::make_unique<GptModel>(config, shape, seed, ops, ledger);
}

}  // namespace parbench

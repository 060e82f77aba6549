#include "train/mlp.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "bench/nvtx.hpp"
#include "train/synthetic_data.hpp"

namespace parbench {
namespace {

struct LayerTensors {
    int weight, bias;
};

std::vector<LayerTensors> build_layout(const ModelConfig& config, ParameterLayout& layout) {
    // N(0, 1/h): unit variance through a linear layer (LeCun initialisation).
    const float stddev = 1.0f / std::sqrt(static_cast<float>(config.hidden));
    std::vector<LayerTensors> layers;
    for (int l = 0; l < config.layers; ++l) {
        const std::string name = "layer" + std::to_string(l);
        layout.add_unit(name);
        LayerTensors t{};
        t.weight = layout.add_tensor(name + ".w", {config.hidden, config.hidden}, InitKind::normal, stddev);
        t.bias = layout.add_tensor(name + ".b", {config.hidden}, InitKind::zeros);
        layers.push_back(t);
    }
    return layers;
}

class MlpModel : public Model {
  public:
    MlpModel(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed, Ops& ops,
             MemoryLedger& ledger)
        : seed_(seed), ops_(ops), device_(ledger.device()), B_(shape.batch), H_(config.hidden), L_(config.layers) {
        tensors_ = build_layout(config, layout_);
        const std::size_t bh = rows() * static_cast<std::size_t>(H_);
        auto floats = [&](std::size_t count) {
            buffers_.push_back(ledger.allocate(MemoryCategory::activations, count * sizeof(float)));
            return buffers_.back();
        };
        for (int k = 0; k < shape.microbatches; ++k) {
            inputs_.push_back(floats(bh));
            targets_.push_back(floats(bh));
            losses_.push_back(floats(rows()));
        }
        for (int l = 0; l < L_; ++l) {
            pre_.push_back(floats(bh).as<float>());
            post_.push_back(l + 1 < L_ ? floats(bh).as<float>() : pre_.back());  // no GELU after the last layer
        }
        dlosses_ = floats(rows()).as<float>();
        dpre_ = floats(bh).as<float>();
        dpost_ = floats(bh).as<float>();
    }

    const ParameterLayout& layout() const override { return layout_; }

    std::vector<int> parameter_use_order() const override {
        std::vector<int> order;
        for (int l = 0; l < L_; ++l) order.push_back(l);
        for (int l = L_ - 2; l >= 0; --l) order.push_back(l);  // the last layer stays held into backward
        return order;
    }

    void stage_batch(int microbatch, std::uint64_t first_sample) override {
        const std::size_t n = rows() * static_cast<std::size_t>(H_);
        std::vector<float> inputs(n), targets(n);
        synthetic_regression(seed_, first_sample, B_, H_, inputs, targets);
        device_.copy_from_host(inputs_[static_cast<std::size_t>(microbatch)], inputs.data(), n * sizeof(float));
        device_.copy_from_host(targets_[static_cast<std::size_t>(microbatch)], targets.data(), n * sizeof(float));
    }

    void forward(int microbatch, ParameterAccess& access) override {
        const float* x = inputs_[static_cast<std::size_t>(microbatch)].as<float>();
        for (int l = 0; l < L_; ++l) {
            NvtxRange range("layer" + std::to_string(l) + " forward");
            const float* p = access.acquire(l);
            const LayerTensors& t = tensors_[static_cast<std::size_t>(l)];
            const auto i = static_cast<std::size_t>(l);
            ops_.matmul_forward(pre_[i], x, param(p, t.weight), param(p, t.bias), B_, H_, H_);
            if (l + 1 < L_) {
                ops_.gelu_forward(post_[i], pre_[i], rows() * static_cast<std::size_t>(H_));
                access.release(l);
            } else {
                last_params_ = p;
            }
            x = post_[i];
        }
        NvtxRange range("loss forward");
        ops_.mse_forward(losses_[static_cast<std::size_t>(microbatch)].as<float>(), pre_.back(),
                         targets_[static_cast<std::size_t>(microbatch)].as<float>(), B_, H_);
    }

    void backward(int microbatch, float loss_scale, ParameterAccess& access) override {
        const std::size_t bh = rows() * static_cast<std::size_t>(H_);
        {
            NvtxRange range("loss backward");
            ops_.fill(dlosses_, loss_scale, rows());
            ops_.fill(dpre_, 0.0f, bh);
            ops_.mse_backward(dpre_, dlosses_, pre_.back(), targets_[static_cast<std::size_t>(microbatch)].as<float>(),
                              B_, H_);
        }
        for (int l = L_ - 1; l >= 0; --l) {
            NvtxRange range("layer" + std::to_string(l) + " backward");
            const float* p = l == L_ - 1 ? last_params_ : access.acquire(l);
            float* g = access.gradients(l);
            const LayerTensors& t = tensors_[static_cast<std::size_t>(l)];
            // dpre_ holds d(pre-activation of layer l).
            const float* x = l == 0 ? inputs_[static_cast<std::size_t>(microbatch)].as<float>()
                                    : post_[static_cast<std::size_t>(l - 1)];
            if (l > 0) ops_.fill(dpost_, 0.0f, bh);
            ops_.matmul_backward(l > 0 ? dpost_ : nullptr, grad(g, t.weight), grad(g, t.bias), dpre_, x,
                                 param(p, t.weight), B_, H_, H_);
            if (l > 0) {
                ops_.fill(dpre_, 0.0f, bh);
                ops_.gelu_backward(dpre_, pre_[static_cast<std::size_t>(l - 1)], dpost_, bh);
            }
            access.release(l);
            access.gradients_complete(l);
        }
        last_params_ = nullptr;
    }

    double mean_loss(int microbatch) const override {
        std::vector<float> losses(rows());
        device_.copy_to_host(losses.data(), losses_[static_cast<std::size_t>(microbatch)], losses.size() * sizeof(float));
        double sum = 0.0;
        for (float loss : losses) sum += loss;
        return sum / static_cast<double>(losses.size());
    }

  private:
    std::size_t rows() const { return static_cast<std::size_t>(B_); }
    const float* param(const float* unit_base, int tensor) const {
        return unit_base + layout_.tensor(tensor).offset_in_unit;
    }
    float* grad(float* unit_base, int tensor) const { return unit_base + layout_.tensor(tensor).offset_in_unit; }

    std::uint64_t seed_;
    Ops& ops_;
    Device& device_;
    int B_, H_, L_;
    ParameterLayout layout_;
    std::vector<LayerTensors> tensors_;
    std::vector<Buffer> buffers_;
    std::vector<Buffer> inputs_, targets_, losses_;  // one slot per micro-batch
    std::vector<float*> pre_, post_;                 // per layer (B,H); post_ of the last layer is its pre_
    float *dlosses_ = nullptr, *dpre_ = nullptr, *dpost_ = nullptr;
    const float* last_params_ = nullptr;  // the last layer, acquired by forward, released by backward
};

}  // namespace

ParameterLayout mlp_parameter_layout(const ModelConfig& config) {
    ParameterLayout layout;
    build_layout(config, layout);
    return layout;
}

std::unique_ptr<Model> make_mlp_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                      Ops& ops, MemoryLedger& ledger) {
    return std::make_unique<MlpModel>(config, shape, seed, ops, ledger);
}

}  // namespace parbench

// The models' backward passes against finite differences of their forward loss, on host
// buffers with no communication: proves the op-by-op wiring (residual sums, the tied
// embedding, GELU between MLP layers), which the --check runs cannot (a wrong gradient is
// wrong the same way serially and in parallel).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "device/cpu_device.hpp"
#include "theory/parameter_layout.hpp"
#include "train/memory_ledger.hpp"
#include "train/model.hpp"
#include "train/ops/ops.hpp"

namespace parbench {
namespace {

// All units in one host buffer, gradients in another: what DDP on one rank looks like.
class HostAccess : public ParameterAccess {
  public:
    HostAccess(const ParameterLayout& layout, std::uint64_t seed)
        : flat_(layout, group_units_by_bytes(layout, 1u << 30), 1), params_(flat_.initial_shard(seed, 0)),
          grads_(params_.size(), 0.0f) {}
    const float* acquire(int unit) override { return params_.data() + flat_.unit_offset(unit); }
    void release(int) override {}
    float* gradients(int unit) override { return grads_.data() + flat_.unit_offset(unit); }
    void gradients_complete(int unit) override { ++completed_[unit]; }

    std::vector<float>& params() { return params_; }
    std::vector<float>& grads() { return grads_; }
    std::map<int, int> completed_;

  private:
    FlatLayout flat_;
    std::vector<float> params_;
    std::vector<float> grads_;
};

// The objective is the mean loss plus the MoE layers' balancing losses (Model::auxiliary_loss),
// which backward differentiates with loss_scale = 1/rows.
void expect_gradients_match(const ModelConfig& config, const MicrobatchShape& shape, double rows,
                            const MoeContext& moe = {}, float step = 1e-2f, bool expect_drops = false) {
    CpuDevice device;
    MemoryLedger ledger(device);
    std::unique_ptr<Ops> ops = make_ops(device);
    std::unique_ptr<Model> model =
        make_model(config, shape, 11, *ops, ledger, {}, {}, Precision::fp32, Recompute::none, {}, moe);
    HostAccess access(model->layout(), 11);
    model->stage_batch(0, 0);
    auto loss_at = [&] {
        model->forward(0, access);  // (HostAccess holds every unit: no release needed)
        return model->mean_loss(0) + model->auxiliary_loss(0);
    };
    model->forward(0, access);
    model->backward(0, static_cast<float>(1.0 / rows), access);  // d(mean loss)/d(row loss)
    for (int unit = 0; unit < static_cast<int>(model->layout().units().size()); ++unit)
        EXPECT_EQ(access.completed_[unit], 1) << "gradients_complete once per unit, unit " << unit;

    const ParameterLayout& layout = model->layout();
    const FlatLayout flat(layout, group_units_by_bytes(layout, 1u << 30), 1);
    const std::vector<float> analytic = access.grads();
    int checked = 0;
    for (const TensorSpec& tensor : layout.tensors()) {
        const std::size_t start = flat.unit_offset(tensor.unit) + tensor.offset_in_unit;
        // A few elements of every tensor, spread over it.
        for (std::size_t k = 0; k < 3; ++k) {
            const std::size_t at = start + (k * 7919) % tensor.numel;
            const float saved = access.params()[at];
            const float h = step;
            access.params()[at] = saved + h;
            const double up = loss_at();
            access.params()[at] = saved - h;
            const double down = loss_at();
            access.params()[at] = saved;
            const double numeric = (up - down) / (2.0 * h);
            const double tolerance = 2e-2 * std::max(std::abs(numeric), std::abs(double(analytic[at]))) + 2e-4;
            EXPECT_NEAR(analytic[at], numeric, tolerance) << tensor.name << "[" << at - start << "]";
            ++checked;
        }
    }
    EXPECT_EQ(checked, static_cast<int>(3 * layout.tensors().size()));
    if (expect_drops) {
        std::int64_t dropped = 0;
        for (const MoeLayerStats& stats : model->finish_step()) dropped += stats.dropped;
        EXPECT_GT(dropped, 0) << "the capacity dropped nothing: the test does not exercise dropping";
    }
}

TEST(ModelGradients, GptMatchesFiniteDifferences) {
    ModelConfig config;
    config.kind = ModelKind::gpt;
    config.name = "gpt-grad";
    config.layers = 2;
    config.hidden = 8;
    config.heads = 2;
    config.seq_len = 4;
    config.vocab = 16;
    expect_gradients_match(config, MicrobatchShape{2, 4, 1}, 2.0 * 4.0);
}

// A Llama whose second layer is a mixture of experts (train/moe/): the router, the expert FFNs
// through the dispatch and combine, the shared expert, and the balancing loss.
ModelConfig llama_moe_config(MoeScore score, int shared) {
    ModelConfig config;
    config.kind = ModelKind::llama;
    config.name = "llama-moe-grad";
    config.layers = 2;
    config.hidden = 8;
    config.heads = 2;
    config.kv_heads = 1;
    config.ffn_hidden = 12;
    config.seq_len = 4;
    config.vocab = 16;
    config.moe = ModelConfig::Moe{4, 2, shared, 6, 1, 1, score};
    return config;
}

// Steps of 1e-3: top-k is piecewise constant, and a step of 1e-2 moves some token's choice.
TEST(ModelGradients, LlamaMoeSoftmaxMatchesFiniteDifferences) {
    expect_gradients_match(llama_moe_config(MoeScore::softmax, 1), MicrobatchShape{2, 4, 1}, 8.0,
                           MoeContext{MoeSettings{std::nullopt, 0.1, 0.0}, nullptr}, 1e-3f);
}

TEST(ModelGradients, LlamaMoeSigmoidMatchesFiniteDifferences) {
    expect_gradients_match(llama_moe_config(MoeScore::sigmoid, 0), MicrobatchShape{2, 4, 1}, 8.0,
                           MoeContext{MoeSettings{std::nullopt, 0.1, 0.0}, nullptr}, 1e-3f);
}

// Capacity 1.0 over 8 tokens x 2 choices / 4 experts: 4 per expert, so a busy expert drops
// some assignments; the dropped ones must carry no gradient.
TEST(ModelGradients, LlamaMoeWithDroppingMatchesFiniteDifferences) {
    expect_gradients_match(llama_moe_config(MoeScore::softmax, 0), MicrobatchShape{2, 4, 1}, 8.0,
                           MoeContext{MoeSettings{1.0, 0.05, 0.0}, nullptr}, 1e-3f, true);
}

// DeepSeek-V3's aux-loss-free balancing: after a step, the expert chosen most moves its bias
// down by the rate and the least chosen up, so with a rate far above the sigmoid scores'
// spread the next forward of the same batch sends fewer assignments to the busiest expert.
TEST(MoeBalancingBias, MovesLoadOffTheBusiestExpert) {
    const ModelConfig config = llama_moe_config(MoeScore::sigmoid, 0);
    CpuDevice device;
    MemoryLedger ledger(device);
    std::unique_ptr<Ops> ops = make_ops(device);
    std::unique_ptr<Model> model = make_model(config, MicrobatchShape{2, 4, 1}, 11, *ops, ledger, {}, {}, Precision::fp32,
                                              Recompute::none, {}, MoeContext{MoeSettings{std::nullopt, 0.0, 1.0}, nullptr});
    HostAccess access(model->layout(), 11);
    model->stage_batch(0, 0);
    model->forward(0, access);
    const std::vector<MoeLayerStats> first = model->finish_step();
    model->forward(0, access);
    const std::vector<MoeLayerStats> second = model->finish_step();
    ASSERT_EQ(first.size(), 1u);
    const std::vector<std::int64_t>& before = first[0].tokens_per_expert;
    const std::vector<std::int64_t>& after = second[0].tokens_per_expert;
    const auto busiest = std::max_element(before.begin(), before.end()) - before.begin();
    ASSERT_GT(before[busiest] * 4, first[0].routed) << "the first step was balanced already: nothing to test";
    EXPECT_LT(after[busiest], before[busiest]);
}

TEST(ModelGradients, MlpMatchesFiniteDifferences) {
    ModelConfig config;
    config.kind = ModelKind::mlp;
    config.name = "mlp-grad";
    config.layers = 3;
    config.hidden = 6;
    expect_gradients_match(config, MicrobatchShape{4, 1, 1}, 4.0);
}

}  // namespace
}  // namespace parbench

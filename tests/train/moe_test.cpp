// The MoE router (train/moe/router.hpp) on cases worked by hand, and the MoE layer's buffers
// against theory/moe_memory.hpp's formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "device/cpu_device.hpp"
#include "theory/model_flops.hpp"
#include "theory/model_layout.hpp"
#include "theory/moe_active_flops.hpp"
#include "theory/moe_memory.hpp"
#include "theory/rank_traffic.hpp"
#include "train/memory_ledger.hpp"
#include "train/models/transformer_parts.hpp"
#include "train/moe/moe_layer.hpp"
#include "train/moe/router.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {
namespace {

// Host buffers for routing a group.
struct Group {
    Group(int N, int E, int k)
        : scores(static_cast<std::size_t>(N * E)), weights(static_cast<std::size_t>(N * k)),
          chosen(static_cast<std::size_t>(N * k)), slot(static_cast<std::size_t>(N * k)),
          expert_start(static_cast<std::size_t>(E + 1)), routed(static_cast<std::size_t>(E)) {}
    RoutingBuffers buffers() {
        return RoutingBuffers{scores.data(), chosen.data(), weights.data(), slot.data(), expert_start.data(),
                              routed.data()};
    }
    std::vector<float> scores, weights;
    std::vector<int> chosen, slot, expert_start, routed;
};

TEST(MoeRouter, TopKTiesGoToTheLowerExpert) {
    const float scores[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    int chosen[2] = {-1, -1};
    moe_top_k(chosen, scores, nullptr, 4, 2);
    EXPECT_EQ(chosen[0], 0);
    EXPECT_EQ(chosen[1], 1);
    // The bias steers the choice (DeepSeek-V3's balancing), largest first.
    const float bias[4] = {0.0f, 0.0f, 0.1f, 0.05f};
    moe_top_k(chosen, scores, bias, 4, 2);
    EXPECT_EQ(chosen[0], 2);
    EXPECT_EQ(chosen[1], 3);
}

TEST(MoeRouter, SoftmaxWeightsAreTheChosenScoresNormalised) {
    Group g(1, 4, 2);
    const float logits[4] = {1.0f, 2.0f, 3.0f, 0.0f};
    const RouterShape shape{1, 4, 2, MoeScore::softmax, std::nullopt};
    const RoutingCounts counts = route_tokens(g.buffers(), logits, nullptr, shape);
    EXPECT_EQ(g.chosen[0], 2);
    EXPECT_EQ(g.chosen[1], 1);
    const double e = std::exp(1.0);
    EXPECT_NEAR(g.weights[0], e / (e + 1.0), 1e-5);  // e^3 / (e^3 + e^2)
    EXPECT_NEAR(g.weights[1], 1.0 / (e + 1.0), 1e-5);
    EXPECT_EQ(counts.dropped, 0);
    EXPECT_EQ(expert_capacity(shape), -1);  // dropless
    // Expert-major rows: expert 1's assignment first, then expert 2's.
    EXPECT_EQ(g.slot[1], 0);
    EXPECT_EQ(g.slot[0], 1);
    EXPECT_EQ(g.expert_start, (std::vector<int>{0, 0, 1, 2, 2}));
}

TEST(MoeRouter, SigmoidWeightsNormaliseTheChosenSigmoids) {
    Group g(1, 3, 2);
    const float logits[3] = {0.0f, 1.0f, -1.0f};
    route_tokens(g.buffers(), logits, nullptr, RouterShape{1, 3, 2, MoeScore::sigmoid, std::nullopt});
    const double s0 = 0.5, s1 = 1.0 / (1.0 + std::exp(-1.0));
    EXPECT_EQ(g.chosen[0], 1);
    EXPECT_EQ(g.chosen[1], 0);
    EXPECT_NEAR(g.weights[0], s1 / (s0 + s1), 1e-5);
    EXPECT_NEAR(g.weights[1], s0 / (s0 + s1), 1e-5);
}

// 4 tokens, 3 experts, top 2, capacity factor 0.75: ceil(4·2/3·0.75) = 2 per expert. Token t's
// logits (a_t, 0, -5) choose experts 0 and 1 with weights sigmoid(a_t) and 1 - sigmoid(a_t).
// Expert 0 keeps the two largest sigmoid(a_t) (tokens 1 and 2), expert 1 the two largest
// 1 - sigmoid(a_t) (tokens 3 and 0); four assignments are dropped.
// Four tokens over three experts, k = 2, capacity factor 0.75: token t's logits (a_t, 0, -5).
const RouterShape capacity_shape{4, 3, 2, MoeScore::softmax, 0.75};
std::vector<float> capacity_logits() {
    std::vector<float> logits;
    for (float a : {1.0f, 3.0f, 2.0f, 0.5f}) logits.insert(logits.end(), {a, 0.0f, -5.0f});
    return logits;
}

TEST(MoeRouter, CapacityDropsTheLowestWeightAssignments) {
    Group g(4, 3, 2);
    const std::vector<float> logits = capacity_logits();
    const RouterShape shape = capacity_shape;
    EXPECT_EQ(expert_capacity(shape), 2);
    const RoutingCounts counts = route_tokens(g.buffers(), logits.data(), nullptr, shape);
    EXPECT_EQ(counts.routed, (std::vector<int>{4, 4, 0}));
    EXPECT_EQ(counts.kept, (std::vector<int>{2, 2, 0}));
    EXPECT_EQ(counts.dropped, 4);
    // slot[t·2 + i]; expert 0's rows in token order (1, 2), then expert 1's (0, 3).
    EXPECT_EQ(g.slot, (std::vector<int>{-1, 2, 0, -1, 1, -1, -1, 3}));
    EXPECT_EQ(g.expert_start, (std::vector<int>{0, 2, 4, 4}));
}

// --check's reference follows the run's drops (router.hpp's FollowedDrops): with the assignments
// to keep given, an expert over capacity keeps those, not its highest weights, and names the flip.
TEST(MoeRouter, FollowedDropsKeepTheGivenAssignmentsAndNameTheFlip) {
    Group g(4, 3, 2);
    const std::vector<float> logits = capacity_logits();
    const RouterShape shape = capacity_shape;
    route_tokens(g.buffers(), logits.data(), nullptr, shape);
    // Its own choice keeps expert 0's assignments of tokens 1 and 2 (assignments 2 and 4); the run
    // kept tokens 0 and 2's (0 and 4) instead; expert 1's as its own (1 and 7).
    std::vector<unsigned char> kept(8, 0);
    for (int assignment : {0, 4, 1, 7}) kept[static_cast<std::size_t>(assignment)] = 1;
    std::vector<std::pair<int, double>> flips;
    const RoutingCounts counts = assign_expert_rows(g.buffers(), shape, FollowedDrops{kept.data(), &flips});
    EXPECT_EQ(counts.kept, (std::vector<int>{2, 2, 0}));
    EXPECT_EQ(counts.dropped, 4);
    EXPECT_EQ(g.slot, (std::vector<int>{0, 2, -1, -1, 1, -1, -1, 3}));
    ASSERT_EQ(flips.size(), 1u);
    EXPECT_EQ(flips[0].first, 0);
    EXPECT_NEAR(flips[0].second, g.weights[2] - g.weights[0], 1e-6);
    EXPECT_GT(flips[0].second, 0.0);
}

// The MoE layer records the decisions it takes, and following other decisions takes those,
// naming each token whose own top-k differed with the margin of its own choice (a decision per
// assignment: the expert, or -(e + 1) dropped).
TEST(MoeLayer, FollowingTakesTheGivenExpertsAndNamesTheFlips) {
    const MoeMemoryShape shape{4, 8, 4, 2, 4, 0};
    CpuDevice device;
    MemoryLedger ledger(device);
    std::unique_ptr<Ops> ops = make_ops(device);
    ActivationArena arena(ledger);
    MoeLayer layer(shape, MoeScore::softmax, MoeSettings{}, *ops, arena);
    const MoeActivations kept = layer.allocate_activations(arena);
    std::vector<float> x(4 * 8), router(4 * 8), gate(4 * 4 * 8), up(4 * 4 * 8), down(4 * 8 * 4), out(4 * 8);
    for (std::vector<float>* values : {&x, &router, &gate, &up, &down})
        for (std::size_t i = 0; i < values->size(); ++i) (*values)[i] = std::sin(0.7f * static_cast<float>(i + values->size()));
    const MoeWeights w{router.data(), gate.data(), up.data(), down.data()};
    MoeExchangeStats stats;
    std::vector<int> own;
    RoutingHold record;
    record.taken = &own;
    layer.forward(out.data(), kept, x.data(), w, nullptr, stats, record);
    ASSERT_EQ(own.size(), 8u);
    const std::vector<float> own_out = out;

    // Following its own decisions changes nothing and flips nothing.
    std::vector<GroupFlip> flips;
    RoutingHold same;
    same.follow = own.data();
    same.flips = &flips;
    layer.forward(out.data(), kept, x.data(), w, nullptr, stats, same);
    EXPECT_TRUE(flips.empty());
    EXPECT_EQ(out, own_out);

    // Token 2's second choice replaced by an expert it did not choose: one flip, margin >= 0.
    std::vector<int> other = own;
    for (int e = 0; e < 4; ++e)
        if (e != own[4] && e != own[5]) other[5] = e;
    std::vector<int> taken;
    RoutingHold follow;
    follow.follow = other.data();
    follow.flips = &flips;
    follow.taken = &taken;
    layer.forward(out.data(), kept, x.data(), w, nullptr, stats, follow);
    ASSERT_EQ(flips.size(), 1u);
    EXPECT_EQ(flips[0].token, 2);
    EXPECT_GE(flips[0].margin, 0.0);
    EXPECT_EQ(taken, other);
    EXPECT_NE(out, own_out);
}

// N = 2, E = 2, k = 1: L_aux = alpha · 2/4 · sum_e routed_e · sum_t P_te.
TEST(MoeRouter, BalancingLossByHand) {
    const float ln3 = std::log(3.0f);
    const RouterShape shape{2, 2, 1, MoeScore::softmax, std::nullopt};
    {  // Balanced: P = (1/4, 3/4) and (3/4, 1/4), one token each: alpha · 1/2 · (1·1 + 1·1) = alpha.
        Group g(2, 2, 1);
        const float logits[4] = {0.0f, ln3, ln3, 0.0f};
        const RoutingCounts counts = route_tokens(g.buffers(), logits, nullptr, shape);
        EXPECT_NEAR(balancing_loss(g.buffers(), counts, shape, 0.01), 0.01, 1e-7);
    }
    {  // Both to expert 1: alpha · 1/2 · (0·0.5 + 2·1.5) = 1.5 alpha.
        Group g(2, 2, 1);
        const float logits[4] = {0.0f, ln3, 0.0f, ln3};
        const RoutingCounts counts = route_tokens(g.buffers(), logits, nullptr, shape);
        EXPECT_NEAR(balancing_loss(g.buffers(), counts, shape, 0.01), 0.015, 1e-7);
    }
}

// What the MoE layer takes from the ledger is theory/moe_memory.hpp's formula, byte for byte.
TEST(MoeMemory, LedgerMatchesFormula) {
    for (const MoeMemoryShape& shape : {MoeMemoryShape{16, 32, 4, 2, 24, 1}, MoeMemoryShape{64, 8, 8, 3, 5, 0},
                                       MoeMemoryShape{10, 16, 2, 1, 40, 2}}) {
        CpuDevice device;
        MemoryLedger ledger(device);
        std::unique_ptr<Ops> ops = make_ops(device);
        ActivationArena arena(ledger);
        const MoeLayer layer(shape, MoeScore::softmax, MoeSettings{}, *ops, arena);
        const std::size_t scratch = ledger.usage().live_of(MemoryCategory::activations);
        EXPECT_EQ(scratch, moe_scratch_bytes(shape));
        layer.allocate_activations(arena);
        EXPECT_EQ(ledger.usage().live_of(MemoryCategory::activations) - scratch, moe_kept_bytes(shape));
        EXPECT_EQ(moe_dispatch_buffer_bytes(shape), 2 * shape.tokens * shape.top_k * shape.hidden * sizeof(float));
    }
}

}  // namespace
}  // namespace parbench

namespace parbench {
namespace {

// The engine's layout holds the parameters theory/moe.hpp counts (what plan reports), for a
// published model and for the test configs (dense layers, shared experts).
TEST(MoeLayout, ParametersMatchTheTheoryCount) {
    for (const char* name : {"mixtral-8x7b", "llama-moe-tiny", "llama-moe-small"}) {
        const ModelConfig config = load_model_config(name);
        ASSERT_TRUE(config.moe) << name;
        EXPECT_EQ(static_cast<std::int64_t>(model_parameter_layout(config, config.seq_len).total_numel()),
                  moe_parameter_count(moe_shape(config)).total)
            << name;
    }
}

}  // namespace
}  // namespace parbench

namespace parbench {
namespace {

// llama-moe-tiny's one MoE layer (h 32, E 4, k 2, S 1, f_e 32) in place of a dense SwiGLU of
// f 64: h·E + (k + S)·3·h·f_e - 3·h·f = 128 + 9216 - 6144 = 3200 weights more per token, so
// the model FLOPs per step grow by 6·B·s·3200 over the dense model of the same config.
TEST(MoeFlops, ActiveWeightsByHand) {
    ModelConfig moe = load_model_config("llama-moe-tiny");
    EXPECT_EQ(moe_active_weight_delta(moe), 3200.0);
    ModelConfig dense = moe;
    dense.moe.reset();
    EXPECT_EQ(moe_active_weight_delta(dense), 0.0);
    EXPECT_DOUBLE_EQ(model_flops_per_step(moe, 8, 16) - model_flops_per_step(dense, 8, 16), 6.0 * 8 * 16 * 3200.0);
}

// Expert parallelism's layout: each ep rank holds the rows of its E/ep experts in units of their
// own, the dense units unchanged; the ranks' pieces put together give the unsplit model, and
// the use order visits each MoE layer's experts right after its block.
TEST(MoeLayout, ExpertSplitHoldsTheRanksExpertsAndMergesBack) {
    const ModelConfig config = load_model_config("llama-moe-tiny");
    const ParameterLayout whole = llama_parameter_layout(config);
    const std::vector<int> expert_units = whole.routed_expert_units();
    ASSERT_EQ(static_cast<int>(expert_units.size()), config.moe_layer_count());
    std::size_t expert_numel = 0;
    for (int unit : expert_units) expert_numel += whole.units()[static_cast<std::size_t>(unit)].numel;
    EXPECT_EQ(expert_numel, static_cast<std::size_t>(config.moe_layer_count()) * config.moe->experts * 3 *
                                config.moe->expert_hidden * config.hidden);
    for (int ep : {2, 4}) {
        std::vector<ParameterLayout> layouts;
        std::vector<std::vector<float>> shards;
        for (int q = 0; q < ep; ++q) {
            layouts.push_back(llama_parameter_layout(config, {}, ExpertSplit{q, ep}));
            const ParameterLayout& layout = layouts.back();
            EXPECT_EQ(layout.dense_units(), whole.dense_units());
            EXPECT_EQ(layout.total_numel(), whole.total_numel() - expert_numel + expert_numel / ep);
            const FlatLayout flat(layout, one_unit_per_group(layout), 1);
            std::vector<float> values(flat.padded_numel());
            flat.initial_values(7, 0, values.size(), values);
            shards.push_back(flat.canonical(values));
        }
        const FlatLayout flat(whole, one_unit_per_group(whole), 1);
        std::vector<float> values(flat.padded_numel());
        flat.initial_values(7, 0, values.size(), values);
        EXPECT_EQ(merge_tensor_parallel_shards(whole, layouts, shards), flat.canonical(values)) << "ep " << ep;
    }
    // --etp 2 (= tp): each tp rank holds a 1/etp slice of each of its experts (gate/up rows, down
    // columns), 1/(ep x etp) of the experts' parameters; every ep x tp rank's pieces merge back.
    for (int ep : {1, 2}) {
        const int etp = 2;
        std::vector<ParameterLayout> layouts;
        std::vector<std::vector<float>> shards;
        for (int q = 0; q < ep; ++q)
            for (int r = 0; r < etp; ++r) {
                layouts.push_back(llama_parameter_layout(config, TensorSplit{r, etp}, ExpertSplit{q, ep, r, etp}));
                const ParameterLayout& layout = layouts.back();
                std::size_t held = 0;
                for (int unit : layout.routed_expert_units()) held += layout.units()[static_cast<std::size_t>(unit)].numel;
                EXPECT_EQ(held, expert_numel / ep / etp);
                const FlatLayout flat(layout, one_unit_per_group(layout), 1);
                std::vector<float> values(flat.padded_numel());
                flat.initial_values(7, 0, values.size(), values);
                shards.push_back(flat.canonical(values));
            }
        const FlatLayout flat(whole, one_unit_per_group(whole), 1);
        std::vector<float> values(flat.padded_numel());
        flat.initial_values(7, 0, values.size(), values);
        EXPECT_EQ(merge_tensor_parallel_shards(whole, layouts, shards), flat.canonical(values)) << "ep " << ep << " etp 2";
    }
    // Block 1 (unit 2) is the MoE layer; its experts are unit L + 2 = 4.
    ASSERT_EQ(moe_expert_unit(config, 1), 4);
    EXPECT_EQ(moe_expert_unit(config, 0), -1);
    EXPECT_EQ(model_parameter_use_order(config), (std::vector<int>{0, 1, 2, 4, 3, 2, 4, 1}));
    EXPECT_EQ(select_use_order(model_parameter_use_order(config), expert_units), (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace parbench

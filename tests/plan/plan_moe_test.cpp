// plan for mixture-of-experts models (plan/moe_plan.hpp): memory per rank on a toy MoE counted by
// hand (dense and expert states, ZeRO over the expert-data-parallel group, the MoE layers'
// activations), the all-to-all's bytes, time and placement, the experts' gradient traffic, the
// active-parameter FLOPs, and --search's expert-parallel degrees.
#include <gtest/gtest.h>

#include <set>

#include "plan/layout_plan.hpp"
#include "plan/layout_search.hpp"
#include "plan/moe_plan.hpp"
#include "tests/support/toy_moe_config.hpp"
#include "theory/model_config.hpp"
#include "theory/model_flops.hpp"
#include "theory/model_layout.hpp"
#include "theory/moe.hpp"
#include "theory/zero_partition.hpp"
#include "theory/moe_work.hpp"

namespace parbench {
namespace {

using parbench::testing::toy_moe;

PlanLayout toy_layout(int dp, int ep, double imbalance = 1.0) {
    PlanLayout p;
    p.states = StateConvention::zero;  // 2 + 2 + 12 B per parameter
    Layout& l = p.engine;
    const ModelConfig config = toy_moe();
    l.model = dense_skeleton(config);
    l.seq_len = 16;
    l.dp = dp;
    l.zero = 1;
    l.microbatch_size = 1;
    l.precision = Precision::bf16;
    p.engine.global_batch = dp;
    p.experts.model = config;
    p.engine.ep = ep;
    p.experts.imbalance = imbalance;
    return p;
}

PlanContext context_on(int gpus, int gpus_per_host) {
    ClusterSpec cluster;
    cluster.device = device_preset("H100");
    cluster.gpus = gpus;
    cluster.gpus_per_host = gpus_per_host;
    ComputeRate rate;
    rate.tflops_per_gpu = 100.0;
    return PlanContext{cluster, CommModel(cluster), rate, PassCosts{}, false, true, std::nullopt};
}

TEST(PlanMoe, ToyParametersCountedByHand) {
    // Skeleton (every layer dense): embedding 2048; per layer attention 64·64 + 2·64·32 + 64·64 =
    // 12288, MLP 3·64·128 = 24576, norms 128; final norm 64; output 2048: 152128.
    const ModelConfig config = toy_moe();
    ASSERT_EQ(model_parameter_layout(dense_skeleton(config), 16).total_numel(), 152128u);
    // Per MoE layer: the dense MLP 24576 goes; router 64·4 = 256 and one shared expert 3·64·32 =
    // 6144 come (dense); 4 routed experts of 6144 = 24576, split over ep.
    const MoeRankParameters r =
        moe_rank_parameters(toy_layout(4, 2), 152128.0, pipeline_rank_layers(toy_layout(4, 2).engine, 0));
    EXPECT_EQ(r.layers, 4);
    EXPECT_EQ(r.moe_layers, 3);
    EXPECT_DOUBLE_EQ(r.dense, 152128.0 - 3 * 24576 + 3 * (256 + 6144));  // 97600
    EXPECT_DOUBLE_EQ(r.routed, 3 * 24576 / 2.0);                          // 36864
    // The whole model, as theory/moe.hpp counts it: dense + every routed expert.
    EXPECT_EQ(moe_parameter_count(moe_shape(config)).total, 97600 + 3 * 24576);
}

TEST(PlanMoe, StatesShardedByEpAndZeroOverTheExpertDataParallelGroup) {
    // dp 4, ep 2: the expert-dp group is 2. ZeRO-1 under ZeRO's bytes: parameters and gradients
    // whole, the optimizer's 12 B over dp 4 (dense) and over 2 (experts).
    const PlanMemory m = plan_memory(toy_layout(4, 2));
    EXPECT_DOUBLE_EQ(m.params, 2.0 * (97600 + 36864));
    EXPECT_DOUBLE_EQ(m.grads, 2.0 * (97600 + 36864));
    EXPECT_DOUBLE_EQ(m.optimizer, 12.0 * 97600 / 4 + 12.0 * 36864 / 2);
    // theory/zero_partition.hpp's rule over the experts' group gives plan's expert part.
    EXPECT_DOUBLE_EQ(m.params + m.grads + m.optimizer - 2.0 * 97600 * 2 - 12.0 * 97600 / 4,
                     zero_partitioned_states({2, 2, 12}, 3 * 24576.0 / 2, 1, 2).total());
    EXPECT_NE(m.convention.find("expert-data-parallel group of dp x cp / ep = 2"), std::string::npos) << m.convention;
    // ep 4: each rank holds one expert per layer, nothing shares its states.
    const PlanMemory four = plan_memory(toy_layout(4, 4));
    EXPECT_DOUBLE_EQ(four.optimizer, 12.0 * 97600 / 4 + 12.0 * 3 * 24576 / 4);
}

TEST(PlanMoe, ActivationsOfTheMoeLayersByHand) {
    // T = 16 tokens. Per MoE layer: router 4·16·4 = 256, permuted copies 2·32·64 = 4096, the
    // copies' gate/up/product 6·(32 + 16 shared)·32 = 9216, expert outputs 2·16·2·64 = 4096:
    // 17664 in place of the dense MLP's 6·16·128 = 12288, 3 such layers.
    PlanLayout dense = toy_layout(4, 2);
    dense.experts = PlanExperts{};
    const double skeleton = plan_memory(dense).activations;
    EXPECT_DOUBLE_EQ(plan_memory(toy_layout(4, 2)).activations - skeleton, 3 * (17664.0 - 12288.0));
    // Imbalance 1.5 on the busiest rank: 48 copies, 2·48·64 = 6144 and 6·(48 + 16)·32 = 12288.
    EXPECT_DOUBLE_EQ(plan_memory(toy_layout(4, 2, 1.5)).activations - skeleton,
                     3 * (256.0 + 6144 + 12288 + 4096 - 12288));
    // ... at most ep: a rank receives every copy at worst.
    EXPECT_DOUBLE_EQ(plan_memory(toy_layout(4, 2, 7.0)).activations, plan_memory(toy_layout(4, 2, 2.0)).activations);
}

TEST(PlanMoe, AlltoallBytesTimeAndPlacement) {
    const PlanContext context = context_on(4, 8);
    const PlanPrediction p = predict_layout(toy_layout(4, 2), context);
    const CommLine* alltoall = nullptr;
    for (const CommLine& line : p.comm)
        if (line.dimension == "ep") alltoall = &line;
    ASSERT_NE(alltoall, nullptr);
    // 4 per MoE layer and micro-batch; each sends 16 tokens x 64 x top 2 x 1/2 remote x 2 B.
    EXPECT_DOUBLE_EQ(alltoall->calls, 12);
    EXPECT_DOUBLE_EQ(alltoall->bytes, 12 * 16.0 * 64 * 2 * 0.5 * 2);
    EXPECT_EQ(alltoall->group, 2);
    EXPECT_EQ(alltoall->placement, Placement::intra_host);
    EXPECT_DOUBLE_EQ(alltoall->time_ms, 12 * context.comm.time_us("alltoall", 16.0 * 64 * 2 * 2, 2, Placement::intra_host) / 1e3);
    EXPECT_DOUBLE_EQ(p.exposed_ep_ms, alltoall->time_ms);
    EXPECT_DOUBLE_EQ(p.moe.alltoall_bytes, alltoall->bytes);
    EXPECT_NEAR(p.step_ms, p.compute_ms + p.bubble_ms + p.optimizer_ms + p.exposed_tp_ms + p.exposed_dp_ms +
                               p.exposed_pp_ms + p.exposed_cp_ms + p.exposed_ep_ms, 1e-9 * p.step_ms);
    // The imbalance scales the busiest receiver's buffer, so the time, and the bytes.
    const PlanPrediction skewed = predict_layout(toy_layout(4, 2, 1.5), context);
    EXPECT_DOUBLE_EQ(skewed.moe.alltoall_bytes, 1.5 * p.moe.alltoall_bytes);
    EXPECT_GT(skewed.exposed_ep_ms, p.exposed_ep_ms);
    // An ep group wider than a host crosses hosts: 4 ranks, 2 GPUs per host.
    const PlanPrediction wide = predict_layout(toy_layout(4, 4), context_on(4, 2));
    EXPECT_EQ(wide.moe.ep_placement, Placement::cross_host);
    // ep 1: every expert on every rank, no all-to-all.
    const PlanPrediction none = predict_layout(toy_layout(4, 1), context);
    EXPECT_DOUBLE_EQ(none.exposed_ep_ms, 0.0);
    for (const CommLine& line : none.comm) EXPECT_NE(line.dimension, "ep");
}

// --moe-a2a-overlap: the counts' alltoall stays exposed, half the dispatch/combine too, and the
// other half is hidden up to the step's compute.
TEST(PlanMoe, OverlapHidesHalfTheAlltoallUpToTheCompute) {
    EXPECT_DOUBLE_EQ(moe_overlapped_exposure(1.0, 10.0, 100.0), 1.0 + 5.0);
    EXPECT_DOUBLE_EQ(moe_overlapped_exposure(1.0, 10.0, 2.0), 1.0 + 5.0 + 3.0);
    EXPECT_DOUBLE_EQ(moe_overlapped_exposure(0.0, 10.0, 0.0), 10.0);  // nothing to overlap: all exposed
    const PlanContext context = context_on(4, 8);
    PlanLayout layout = toy_layout(4, 2);
    const PlanPrediction blocking = predict_layout(layout, context);
    layout.engine.moe.a2a_overlap = true;
    const PlanPrediction overlapped = predict_layout(layout, context);
    EXPECT_DOUBLE_EQ(overlapped.exposed_ep_ms, moe_overlapped_exposure(0.0, blocking.exposed_ep_ms, blocking.compute_ms));
    EXPECT_LT(overlapped.exposed_ep_ms, blocking.exposed_ep_ms);
    EXPECT_NEAR(overlapped.step_ms, blocking.step_ms - (blocking.exposed_ep_ms - overlapped.exposed_ep_ms),
                1e-9 * blocking.step_ms);
    EXPECT_DOUBLE_EQ(overlapped.moe.alltoall_bytes, blocking.moe.alltoall_bytes);  // the same traffic
}

TEST(PlanMoe, ExpertGradientsReduceOverTheirOwnGroup) {
    // The skeleton's dp bytes split by parameter: the dense part and, over the expert-dp group,
    // the experts' part (none with ep = dp, whose experts have no replica).
    PlanLayout dense = toy_layout(4, 2);
    dense.experts = PlanExperts{};
    const PlanContext context = context_on(4, 8);
    auto dp_bytes = [&](const PlanLayout& layout) {
        double bytes = 0;
        for (const CommLine& line : predict_layout(layout, context).comm)
            if (line.dimension == "dp") bytes += line.bytes;
        return bytes;
    };
    const double skeleton = dp_bytes(dense);
    EXPECT_NEAR(dp_bytes(toy_layout(4, 2)), skeleton * (97600.0 + 36864) / 152128, 1e-9 * skeleton);
    EXPECT_NEAR(dp_bytes(toy_layout(4, 4)), skeleton * 97600.0 / 152128, 1e-9 * skeleton);
}

TEST(PlanMoe, FlopsOnActiveParameters) {
    // Forward per token and MoE layer: router 2·64·4 + (2 + 1)·2·3·64·32 in place of 2·3·64·128.
    const ModelConfig config = toy_moe();
    const double tokens = 4.0 * 16;
    EXPECT_DOUBLE_EQ(moe_model_flops_per_step(config, 4, 16),
                     model_flops_per_step(dense_skeleton(config), 4, 16) +
                         3 * tokens * 3 * (2.0 * 64 * 4 + 3 * 2.0 * 3 * 64 * 32 - 2.0 * 3 * 64 * 128));
    const PlanPrediction p = predict_layout(toy_layout(4, 2), context_on(4, 8));
    EXPECT_DOUBLE_EQ(p.flops_per_step, moe_model_flops_per_step(config, 4, 16));
}

TEST(PlanMoe, SearchRangesOverEpDividingExpertsAndDp) {
    // with_expert_degrees: dp 8 and 4 experts take ep 1, 2 and 4; dp 2 only 1 and 2; a dense
    // layout passes as it is; hybrid sharding is not modelled for experts and goes.
    std::vector<PlanLayout> layouts{toy_layout(8, 1), toy_layout(2, 1)};
    PlanLayout dense = toy_layout(8, 1);
    dense.experts = PlanExperts{};
    layouts.push_back(dense);
    PlanLayout hybrid = toy_layout(8, 1);
    hybrid.shard_group = 4;
    layouts.push_back(hybrid);
    std::vector<int> degrees;
    for (const PlanLayout& layout : with_expert_degrees(layouts)) degrees.push_back(layout.engine.ep);
    EXPECT_EQ(degrees, (std::vector<int>{1, 2, 4, 1, 2, 1}));

    SearchSpace space;
    space.base = toy_layout(1, 1);
    space.base.engine.global_batch = 8;
    space.microbatch_counts = {1, 2};
    const SearchResult result = search_layouts(space, context_on(8, 8));
    ASSERT_FALSE(result.ranked.empty());
    std::set<int> seen;
    for (const PlanPrediction& p : result.ranked) {
        EXPECT_EQ(4 % p.layout.engine.ep, 0) << layout_label(p.layout);
        EXPECT_EQ(p.layout.engine.dp % p.layout.engine.ep, 0) << layout_label(p.layout);
        EXPECT_NE(layout_label(p.layout).find(" ep" + std::to_string(p.layout.engine.ep)), std::string::npos);
        seen.insert(p.layout.engine.ep);
    }
    EXPECT_EQ(seen, (std::set<int>{1, 2, 4}));
}

// Under --states parbench the layouts are train's: the MoE model itself on the engine (a rank's
// E/ep routed experts whole on every tp rank, the ep in the engine layout that shards the experts
// and sizes the receive buffers and the exchanges), tp with and without sp and zb-h1 kept (train
// runs them all for MoE); its memory counts the MoE model's parameters, not the skeleton's.
TEST(PlanMoe, ParbenchStatesFollowTrainsMoeLayout) {
    const auto engine_layout = [](int dp, int tp, bool sp) {
        PlanLayout p = toy_layout(dp, 1);
        p.states = StateConvention::parbench;
        p.engine.model = toy_moe();
        p.engine.precision = Precision::fp32;
        p.engine.tp = tp;
        p.engine.sp = sp;
        return p;
    };
    PlanLayout zero_bubble = engine_layout(4, 1, false);
    zero_bubble.engine.pp = 2;
    zero_bubble.engine.schedule = ScheduleKind::zero_bubble_h1;
    const std::vector<PlanLayout> formed =
        with_expert_degrees({engine_layout(4, 1, false), engine_layout(2, 2, false), engine_layout(2, 2, true), zero_bubble});
    std::vector<std::pair<int, int>> degrees;  // (tp, ep)
    for (const PlanLayout& layout : formed) degrees.push_back({layout.engine.tp, layout.engine.ep});
    EXPECT_EQ(degrees, (std::vector<std::pair<int, int>>{
                           {1, 1}, {1, 2}, {1, 4}, {2, 1}, {2, 2}, {2, 1}, {2, 2}, {1, 1}, {1, 2}, {1, 4}}));

    const PlanLayout layout = engine_layout(2, 1, false);
    const PlanPrediction prediction = predict_layout(layout, context_on(2, 8));
    const double parameters = static_cast<double>(model_parameter_layout(toy_moe(), 16).total_numel());
    EXPECT_DOUBLE_EQ(prediction.memory.params, 4.0 * parameters);  // fp32, every expert on the rank
    EXPECT_DOUBLE_EQ(prediction.moe.dense_parameters_rank + prediction.moe.expert_parameters_rank, parameters);
    EXPECT_EQ(prediction.moe.expert_dp, 2);  // without ep every dp rank holds the same experts

    // At ep 2 a rank holds half the routed experts, reduced over dp / ep = 1 rank, as Megatron-core.
    PlanLayout sharded = engine_layout(2, 1, false);
    sharded.engine.ep = 2;
    const PlanPrediction half = predict_layout(sharded, context_on(2, 8));
    const double held = static_cast<double>(model_parameter_layout(toy_moe(), 16, {}, ExpertSplit{0, 2}).total_numel());
    EXPECT_LT(held, parameters);
    EXPECT_DOUBLE_EQ(half.memory.params, 4.0 * held);
    EXPECT_DOUBLE_EQ(half.moe.expert_parameters_rank, prediction.moe.expert_parameters_rank / 2);
    EXPECT_DOUBLE_EQ(half.moe.dense_parameters_rank + half.moe.expert_parameters_rank, held);
    EXPECT_EQ(half.moe.expert_dp, 1);
}

}  // namespace
}  // namespace parbench

// plan's pricing of --moe-a2a-overlap-1f1b (plan/moe_plan.hpp): one paired (F, B) group's exposed
// all-to-all from its stretches of compute, worked by hand; a rank's step with its warm-up and
// cool-down passes unpaired; a whole prediction, whose traffic the pairing leaves as it is and
// whose last stage stays blocking; --search's paired variants.
#include <gtest/gtest.h>

#include <stdexcept>

#include "plan/layout_plan.hpp"
#include "plan/moe_plan.hpp"
#include "plan/stage_compute.hpp"
#include "tests/support/toy_moe_config.hpp"
#include "theory/model_config.hpp"
#include "theory/moe_work.hpp"

namespace parbench {
namespace {

// A paired group's timeline on one thread: F runs a stretch and posts, B runs one and posts, F
// waits for its exchange and runs its next, and so on.
TEST(PlanMoe1f1b, ExchangesShorterThanThePartnersComputeAreHidden) {
    // One MoE layer: F = 1 | dispatch | 2 | combine | 1, the same for B; each exchange 0.5.
    EXPECT_DOUBLE_EQ(moe_paired_group_exposed_ms({{1, 2, 1}, {1, 2, 1}}, 0.5), 0.0);
    // Two MoE layers, every stretch at least as long as an exchange.
    EXPECT_DOUBLE_EQ(moe_paired_group_exposed_ms({{3, 1, 2, 1, 3}, {2, 1, 1, 1, 2}}, 1.0), 0.0);
}

TEST(PlanMoe1f1b, AlltoallLongerThanThePartnersComputeIsExposedByTheDifference) {
    // Stretches of 1, exchanges of 3. F posts at 1 (done 4); B runs to 2 and posts (done 5); F
    // waits 2 (to 4), runs to 5, posts (done 8); B's exchange is done at 5: no wait, B runs to 6
    // and posts (done 9); F waits 2 (to 8), runs to its end at 9; B's last is done at 9: no wait.
    // Each exchange exposes max(0, 3 - what the partner ran since its post): 2, 0, 2, 0.
    EXPECT_DOUBLE_EQ(moe_paired_group_exposed_ms({{1, 1, 1}, {1, 1, 1}}, 3.0), 4.0);
    // Blocking, the same passes would wait for all four: 12.
    EXPECT_DOUBLE_EQ(moe_rank_exposed_ms(1, 0, 1, 3.0, 0.0, 0.0), 12.0);
    EXPECT_DOUBLE_EQ(moe_rank_exposed_ms(1, 1, 1, 3.0, 0.0, 4.0), 4.0);
    // Nothing to compute between the switches: F waits 3 for each of its two exchanges, and B's
    // travel meanwhile (each posted as F starts waiting), so B waits for nothing.
    EXPECT_DOUBLE_EQ(moe_paired_group_exposed_ms({{0, 0, 0}, {0, 0, 0}}, 3.0), 6.0);
}

TEST(PlanMoe1f1b, NoMoeLayerNoExchangeAndMalformedStretchesRefused) {
    EXPECT_DOUBLE_EQ(moe_paired_group_exposed_ms({{5}, {7}}, 3.0), 0.0);
    EXPECT_THROW(moe_paired_group_exposed_ms({{1, 1}, {1, 1}}, 1.0), std::logic_error);
    EXPECT_THROW(moe_paired_group_exposed_ms({{1, 1, 1}, {1}}, 1.0), std::logic_error);
}

TEST(PlanMoe1f1b, WarmupAndCooldownPassesStayBlocking) {
    // 4 micro-batches, 3 paired groups, 2 MoE layers: the warm-up forward and the cool-down
    // backward wait for their 2 x 2 exchanges of 1 ms each (8), every forward for its counts'
    // alltoall (4 x 2 x 0.1), the groups 0.5 each.
    EXPECT_DOUBLE_EQ(moe_rank_exposed_ms(4, 3, 2, 1.0, 0.1, 0.5), 8.0 + 0.8 + 1.5);
    // The last stage pairs nothing: all 4 x 4 x 2 exchanges.
    EXPECT_DOUBLE_EQ(moe_rank_exposed_ms(4, 0, 2, 1.0, 0.1, 0.5), 32.0 + 0.8);
}

// Two stages of the toy: the first holding layers 0-2 (MoE 1 and 2), the last layer 3.
using parbench::testing::toy_moe;

PlanLayout toy_pipeline(int microbatches) {
    PlanLayout p;
    p.states = StateConvention::zero;
    Layout& l = p.engine;
    const ModelConfig config = toy_moe();
    l.model = dense_skeleton(config);
    l.seq_len = 16;
    l.dp = 2;
    l.pp = 2;
    l.microbatches = microbatches;
    l.schedule = ScheduleKind::one_f_one_b;
    l.stage_ranges = {LayerRange{0, 3}, LayerRange{3, 4}};
    l.microbatch_size = 1;
    l.precision = Precision::bf16;
    p.engine.global_batch = 2 * microbatches;
    p.experts.model = config;
    p.engine.ep = 2;
    return p;
}

PlanContext context_at(double tflops) {
    ClusterSpec cluster;
    cluster.device = device_preset("H100");
    cluster.gpus = 4;
    cluster.gpus_per_host = 8;
    ComputeRate rate;
    rate.tflops_per_gpu = tflops;
    return PlanContext{cluster, CommModel(cluster), rate, PassCosts{}, false, true, std::nullopt};
}

TEST(PlanMoe1f1b, StretchesCutAtEveryExchange) {
    const PlanLayout p = toy_pipeline(4);
    const auto flops = [](const PassWork& work) { return work.flops(); };
    const std::vector<ExchangeStretches> stretches = moe_exchange_stretches(p.engine, p.engine.attention, p.experts, flops);
    ASSERT_EQ(stretches.size(), 2u);
    // 2 MoE layers on the first stage: 5 stretches each way; 1 on the last: 3.
    EXPECT_EQ(stretches[0].forward_ms.size(), 5u);
    EXPECT_EQ(stretches[0].backward_ms.size(), 5u);
    EXPECT_EQ(stretches[1].forward_ms.size(), 3u);
    // Between each dispatch and its combine, the routed experts: E/ep = 2 experts of T k / E x ep
    // = 16 rows each, gate/up 64 -> 64 and down 32 -> 64: 2 x 2 x 16 x (64 x 64 + 32 x 64) FLOPs.
    const double routed = 2 * 2.0 * 16 * (64 * 64 + 32 * 64);
    EXPECT_DOUBLE_EQ(stretches[0].forward_ms[1], routed);
    EXPECT_DOUBLE_EQ(stretches[0].forward_ms[3], routed);
    EXPECT_DOUBLE_EQ(stretches[0].backward_ms[1], 2 * routed);  // input and weight gradients
    // Every FLOP of the rank's forward falls in one stretch.
    double sum = 0;
    for (double f : stretches[1].forward_ms) sum += f;
    const LayerWorkShape shape{toy_moe(), 16, 16, 1, 1, false, 2.0};
    LayerWork moe = moe_layer_work(shape, p.engine.attention, Recompute::none, 2, 1.0);
    EXPECT_DOUBLE_EQ(sum, moe.forward.flops() + head_work(LayerWorkShape{dense_skeleton(toy_moe()), 16, 16, 1, 1,
                                                                         false, 2.0}).forward.flops());
}

TEST(PlanMoe1f1b, PredictionPairsEveryStageButTheLastAndMovesTheSameBytes) {
    const PlanContext context = context_at(100.0);
    PlanLayout layout = toy_pipeline(4);
    const PlanPrediction blocking = predict_layout(layout, context);
    layout.engine.moe.a2a_overlap_1f1b = true;
    const PlanPrediction paired = predict_layout(layout, context);
    // The same traffic, line for line.
    ASSERT_EQ(paired.comm.size(), blocking.comm.size());
    for (std::size_t i = 0; i < paired.comm.size(); ++i) {
        EXPECT_EQ(paired.comm[i].calls, blocking.comm[i].calls);
        EXPECT_EQ(paired.comm[i].bytes, blocking.comm[i].bytes);
    }
    EXPECT_EQ(paired.passes_by_pp_rank, blocking.passes_by_pp_rank);
    EXPECT_EQ(paired.memory.total, blocking.memory.total);
    // 1F1B on 2 stages, 4 micro-batches: the first stage's one warm-up forward and one cool-down
    // backward unpaired, 3 groups; the last stage none.
    ASSERT_EQ(paired.moe.paired_groups_by_pp_rank, (std::vector<int>{3, 0}));
    const double a = paired.moe.exchange_ms;
    EXPECT_GT(a, 0.0);
    EXPECT_DOUBLE_EQ(paired.moe.blocking_exposed_ms_by_pp_rank[0], 4 * 4 * 2 * a);
    EXPECT_DOUBLE_EQ(paired.moe.blocking_exposed_ms_by_pp_rank[1], 4 * 4 * 1 * a);
    EXPECT_DOUBLE_EQ(paired.moe.paired_exposed_ms_by_pp_rank[1], paired.moe.blocking_exposed_ms_by_pp_rank[1]);
    EXPECT_LT(paired.moe.paired_exposed_ms_by_pp_rank[0], paired.moe.blocking_exposed_ms_by_pp_rank[0]);
    // At least the unpaired passes' exchanges stay exposed.
    EXPECT_GE(paired.moe.paired_exposed_ms_by_pp_rank[0], 1 * 4 * 2 * a);
    // The step waits for the most exposed stage.
    EXPECT_DOUBLE_EQ(paired.exposed_ep_ms, std::max(paired.moe.paired_exposed_ms_by_pp_rank[0],
                                                    paired.moe.paired_exposed_ms_by_pp_rank[1]));
    EXPECT_LT(paired.exposed_ep_ms, blocking.exposed_ep_ms);
    EXPECT_NEAR(paired.step_ms, blocking.step_ms - (blocking.exposed_ep_ms - paired.exposed_ep_ms),
                1e-9 * blocking.step_ms);
}

TEST(PlanMoe1f1b, ComputeLongerThanTheExchangesLeavesTheUnpairedPassesAndEmptyStretches) {
    // A slow device: every stretch with work in it outlasts an exchange. The first stage ends in
    // an MoE layer, so a backward there starts at that layer's combine mirror with nothing before
    // it (the gradient arrives before the pair starts): F's first dispatch has nothing to hide
    // under, one exchange per group; the warm-up forward and cool-down backward wait for all 2 x 2.
    PlanLayout layout = toy_pipeline(4);
    layout.engine.moe.a2a_overlap_1f1b = true;
    const PlanPrediction paired = predict_layout(layout, context_at(1e-6));
    // (The clock runs to long times here: the waits are differences of large numbers.)
    EXPECT_NEAR(paired.moe.paired_exposed_ms_by_pp_rank[0], (1 * 4 * 2 + 3 * 1) * paired.moe.exchange_ms,
                1e-9 * paired.moe.exchange_ms);
}

TEST(PlanMoe1f1b, SearchAddsThePairedVariantWhereTrainTakesIt) {
    PlanLayout layout = toy_pipeline(4);
    EXPECT_EQ(with_a2a_overlap_1f1b({layout}).size(), 2u);
    EXPECT_TRUE(with_a2a_overlap_1f1b({layout})[1].engine.moe.a2a_overlap_1f1b);
    PlanLayout gpipe = layout;
    gpipe.engine.schedule = ScheduleKind::gpipe;
    EXPECT_EQ(with_a2a_overlap_1f1b({gpipe}).size(), 1u);
    PlanLayout one_microbatch = toy_pipeline(1);
    EXPECT_EQ(with_a2a_overlap_1f1b({one_microbatch}).size(), 1u);
    PlanLayout last_stage_only = layout;  // MoE layers 1-3 all on the last stage
    last_stage_only.engine.stage_ranges = {LayerRange{0, 1}, LayerRange{1, 4}};
    EXPECT_EQ(with_a2a_overlap_1f1b({last_stage_only}).size(), 1u);
    PlanLayout no_ep = layout;
    no_ep.engine.ep = 1;
    EXPECT_EQ(with_a2a_overlap_1f1b({no_ep}).size(), 1u);
    PlanLayout full_recompute = layout;
    full_recompute.engine.recompute = Recompute::full;
    EXPECT_EQ(with_a2a_overlap_1f1b({full_recompute}).size(), 1u);
    PlanLayout experts_split = layout;  // the frameworks' default --etp is tp
    experts_split.engine.etp = 2;
    EXPECT_EQ(with_a2a_overlap_1f1b({experts_split}).size(), 1u);
}

}  // namespace
}  // namespace parbench

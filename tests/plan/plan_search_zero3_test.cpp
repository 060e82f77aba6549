// What ZeRO-3 costs in the layouts --search ranks: DeepSpeed's third gather under full recompute
// (theory/traffic.hpp, deepspeed_recompute_regather, a replay of DeepSpeed's parameter
// coordinator) on counts derived by hand, and the per-micro-batch exposure of zero3_exposed_ms.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan/layout_plan.hpp"
#include "theory/model_config.hpp"
#include "theory/model_layout.hpp"
#include "theory/traffic.hpp"

namespace parbench {
namespace {

ModelConfig gpt3_175b() {
    return load_model_config(std::string(PARBENCH_TEST_MODELS) + "/gpt3-175b.json");
}

ParameterLayout tensor_split_layout(const ModelConfig& config, int tp) {
    return model_parameter_layout(config, config.seq_len, TensorSplit{0, tp, false, TensorParallelStyle::megatron},
                                  ExpertSplit{0, 1});
}

TEST(DeepSpeedRecompute, ReuseDistanceAloneDecidesWithoutPrefetch) {
    // Blocks of two submodules, a of 6 and b of 4 elements, no prefetch: after a's recompute
    // forward the trace holds b (4), then b's backward (4), then a's backward. A reuse distance
    // of 8 stops the walk before a's backward: a is released and gathered again; b's backward
    // follows at once (distance 0 < 8): kept.
    DeepSpeedZero3Config settings;
    settings.prefetch_bucket_size = 0;
    settings.param_persistence_threshold = 0;
    settings.max_reuse_distance = 8;
    const RecomputeRegather eight = deepspeed_recompute_regather({{6}, {4}}, 3, 100, settings);
    EXPECT_DOUBLE_EQ(eight.uses, 3.0);
    EXPECT_DOUBLE_EQ(eight.elements, 18.0);
    // A distance of 9 reaches a's backward: nothing gathered a third time.
    settings.max_reuse_distance = 9;
    EXPECT_DOUBLE_EQ(deepspeed_recompute_regather({{6}, {4}}, 3, 100, settings).uses, 0.0);
    // Distance 0 keeps nothing: every submodule of every block is gathered again.
    settings.max_reuse_distance = 0;
    const RecomputeRegather none = deepspeed_recompute_regather({{6}, {4}}, 3, 100, settings);
    EXPECT_DOUBLE_EQ(none.uses, 6.0);
    EXPECT_DOUBLE_EQ(none.elements, 30.0);
    // Parameters at or under the persistence threshold are never partitioned: never re-gathered.
    settings.param_persistence_threshold = 4;
    EXPECT_DOUBLE_EQ(deepspeed_recompute_regather({{6}, {4}}, 3, 100, settings).elements, 18.0);
}

TEST(DeepSpeedRecompute, PrefetchWalkPastTheBackwardUseKeepsAParameter) {
    // Reuse distance 1 keeps only a use that comes next (b's recompute, then its backward); a's
    // is 4 elements away (ReuseDistanceAloneDecidesWithoutPrefetch: re-gathered). A bucket of 100
    // lets the second fetch walk the queue to its end (held parameters count nothing), past every
    // backward use, so a is kept too.
    DeepSpeedZero3Config settings;
    settings.param_persistence_threshold = 0;
    settings.max_reuse_distance = 1;
    settings.prefetch_bucket_size = 100;
    EXPECT_DOUBLE_EQ(deepspeed_recompute_regather({{6}, {4}}, 3, 100, settings).uses, 0.0);
    settings.prefetch_bucket_size = 0;
    EXPECT_DOUBLE_EQ(deepspeed_recompute_regather({{6}, {4}}, 3, 100, settings).uses, 3.0);
}

TEST(DeepSpeedRecompute, Gpt3At175BWithDeepSpeedsDefaults) {
    const ModelConfig config = gpt3_175b();
    const double h = config.hidden;
    // Tensor parallelism 1 (arXiv 2104.04473 table 2's ZeRO-3): a block's submodules hold 3h^2
    // (query_key_value), h^2 (dense), 4h^2 and 4h^2 (the MLP), 1.8e9 elements in all. Each of the
    // first three is followed, before its backward use, by at least 2 x 604e6 elements (the MLP
    // twice), past the default reuse distance of 1e9, and the 5e8-element prefetch bucket fills
    // before the walk reaches those uses: they are gathered a third time, 8h^2 per block (the
    // biases, 3h, h and 4h elements, are under the 1e5 persistence threshold).
    const RecomputeRegather tp1 = deepspeed_recompute_regather(config, tensor_split_layout(config, 1));
    EXPECT_DOUBLE_EQ(tp1.uses, 3.0 * config.layers);
    EXPECT_DOUBLE_EQ(tp1.elements, 8.0 * h * h * config.layers);
    // Tensor parallelism 2 halves every block (9.1e8 elements): the prefetch walk, skipping the
    // parameters already held, passes their backward uses before the recompute releases them.
    EXPECT_DOUBLE_EQ(deepspeed_recompute_regather(config, tensor_split_layout(config, 2)).uses, 0.0);
    // Without prefetch the reuse distance alone decides at tp 2: query_key_value (2 x 6.8e8 of
    // the submodules after it) and dense (2 x 6.04e8) go past 1e9, the MLP's stay: 2h^2 per block.
    DeepSpeedZero3Config no_prefetch;
    no_prefetch.prefetch_bucket_size = 0;
    const RecomputeRegather tp2 = deepspeed_recompute_regather(config, tensor_split_layout(config, 2), no_prefetch);
    EXPECT_DOUBLE_EQ(tp2.uses, 2.0 * config.layers);
    EXPECT_DOUBLE_EQ(tp2.elements, 2.0 * h * h * config.layers);
}

TEST(DeepSpeedRecompute, RefusesModelsWithoutItsSubmodules) {
    ModelConfig config = gpt3_175b();
    config.moe = ModelConfig::Moe{8, 2, 0, 4 * config.hidden, 1, 0, MoeScore::softmax, ExpertActivation::gelu};
    EXPECT_THROW(deepspeed_recompute_regather(config, ParameterLayout{}), std::logic_error);
}

TEST(Zero3Overlap, EveryMicroBatchStartsOnAnExposedGatherAndEndsOnAReduceScatter) {
    // Two micro-batches of two units: 8 gathers and 4 reduce-scatters of 10 ms; forward 32 ms (8
    // per unit), backward 60 ms (15 per unit). Forward: 2 x 10 + 2 x (10 - 8) = 24. Backward: 2 x
    // 10 + 2 x (10 + 10 - 15) + 2 x 10 = 50.
    EXPECT_DOUBLE_EQ(zero3_exposed_ms(80, 8, 40, 4, 32, 60, true, 2), 74.0);
    // Counted as one micro-batch of four units it would hide two gathers and a reduce-scatter:
    // 10 + 3 x 2 + 10 + 3 x 5 + 10 = 51.
    EXPECT_DOUBLE_EQ(zero3_exposed_ms(80, 8, 40, 4, 32, 60, true, 1), 51.0);
}

TEST(Zero3Overlap, ReGathersShareTheBackwardsLink) {
    // One micro-batch, two units (as Zero3Overlap.NextGatherHidesBehindOneLayerAndNoMore: 37 ms)
    // and 6 ms of re-gathers in the backward's one window: 10 + (10 + 10 + 6 - 15) + 10 = 31,
    // forward 12.
    EXPECT_DOUBLE_EQ(zero3_exposed_ms(40, 4, 20, 2, 16, 30, true, 1, 6), 43.0);
    // Behind a long enough backward they hide.
    EXPECT_DOUBLE_EQ(zero3_exposed_ms(40, 4, 20, 2, 100, 100, true, 1, 6), 30.0);
}

}  // namespace
}  // namespace parbench

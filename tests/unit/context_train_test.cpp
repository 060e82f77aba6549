// Context parallelism outside its attention: the mesh's cp dimension (order tp-cp-dp-pp, the
// dp x cp gradient group), train's refusals of --cp layouts that cannot run, and the formulas
// train and plan share (activation memory per rank, the cp traffic per step).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "theory/activation_memory.hpp"
#include "theory/context_parallel.hpp"
#include "train/mesh.hpp"
#include "train/train_options.hpp"

namespace parbench {
namespace {

TEST(ContextMesh, TensorThenContextThenDataThenPipeline) {
    MeshShape shape;
    shape.dp = 2;
    shape.tp = 2;
    shape.pp = 2;
    shape.cp = 2;
    EXPECT_EQ(shape.world(), 16);
    const MeshCoordinates at = mesh_coordinates(shape, 11);  // 11 = ((0·2 + 1)·2 + 1)·2 + 1
    EXPECT_EQ(at.tp, 1);
    EXPECT_EQ(at.cp, 1);
    EXPECT_EQ(at.dp, 0);
    EXPECT_EQ(at.pp, 1);
    EXPECT_EQ(mesh_rank(shape, at), 11);
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::tp, 11), (std::vector<int>{10, 11}));
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::cp, 11), (std::vector<int>{9, 11}));
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::dp, 11), (std::vector<int>{11, 15}));
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::pp, 11), (std::vector<int>{3, 11}));
    // The gradient group: every rank with this tp and pp coordinate, dp-major, cp-minor.
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::dp_cp, 11), (std::vector<int>{9, 11, 13, 15}));
}

TEST(ContextMesh, EveryDimensionPartitionsTheWorld) {
    MeshShape shape;
    shape.dp = 3;
    shape.tp = 2;
    shape.cp = 3;
    for (MeshDimension d :
         {MeshDimension::dp, MeshDimension::tp, MeshDimension::pp, MeshDimension::cp, MeshDimension::dp_cp}) {
        std::vector<int> seen(static_cast<std::size_t>(shape.world()), 0);
        for (const auto& group : mesh_all_groups(shape, d))
            for (int rank : group) ++seen[static_cast<std::size_t>(rank)];
        EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), shape.world());
    }
    EXPECT_EQ(mesh_all_groups(shape, MeshDimension::cp).size(), 6u);
    EXPECT_EQ(mesh_all_groups(shape, MeshDimension::dp_cp).size(), 2u);
    EXPECT_EQ(mesh_all_groups(shape, MeshDimension::dp_cp)[0].size(), 9u);
}

TEST(ContextMesh, WithoutContextParallelismTheOrderIsTensorDataPipeline) {
    const MeshShape shape{2, 2, 2};  // dp, tp, pp; cp 1
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::dp, 5), (std::vector<int>{5, 7}));
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::cp, 5), (std::vector<int>{5}));
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::dp_cp, 5), (std::vector<int>{5, 7}));
}

TrainOptions llama_tiny() {
    TrainOptions options;
    options.model = "llama-tiny";  // seq 32, 4 heads
    return options;
}

TEST(ContextOptions, LayoutsThatCannotRunAreRefused) {
    TrainOptions o = llama_tiny();
    o.layout.cp = 3;  // 32 tokens do not split into 6 zigzag chunks
    EXPECT_THROW(resolve_train_options(o), UsageError);
    o.layout.cp_balance = "none";  // ... nor into 3
    EXPECT_THROW(resolve_train_options(o), UsageError);
    o.seq = 24;
    EXPECT_NO_THROW(resolve_train_options(o));
    o = llama_tiny();
    o.layout.cp_style = "alltoall";  // without --cp > 1
    EXPECT_THROW(resolve_train_options(o), UsageError);
    o.layout.cp = 2;
    EXPECT_NO_THROW(resolve_train_options(o));
    o.layout.cp_style = "ulysses";
    EXPECT_THROW(resolve_train_options(o), UsageError);
    o = llama_tiny();
    o.layout.cp = 2;
    o.model = "mlp-tiny";
    EXPECT_THROW(resolve_train_options(o), UsageError);
    o = llama_tiny();
    o.layout.cp = 4;
    o.layout.tp = 2;
    o.layout.sp = true;
    o.seq = 16;  // 4 tokens per cp rank split over tp 2: fine
    EXPECT_NO_THROW(resolve_train_options(o));
}

TEST(ContextOptions, TheWorldIsDataTimesTensorTimesPipelineTimesContext) {
    TrainOptions o = llama_tiny();
    o.layout.cp = 2;
    o.layout.tp = 2;
    const TrainPlan plan = resolve_train_options(o);
    const MeshShape shape = mesh_shape(resolve_train_plan(plan, 8).layout);
    EXPECT_EQ(shape.dp, 2);
    EXPECT_EQ(shape.cp, 2);
    EXPECT_THROW(resolve_train_plan(plan, 6), UsageError);
    o.layout.dp = 1;
    EXPECT_THROW(resolve_train_plan(resolve_train_options(o), 8), UsageError);
}

TEST(ContextFormulas, PaperActivationsTakeThePerTokenTermsAtSOverC) {
    // Megatron-scale layer: s 8192, b 1, h 8192, a 64, t 8 with SP, c 4.
    const LayerActivationShape whole{8192, 1, 8192, 64, 8, true, 1};
    LayerActivationShape split = whole;
    split.cp = 4;
    const double sbh = 8192.0 * 8192.0;
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(whole, Recompute::none), sbh * (34.0 / 8 + 5.0 * 64 * 8192 / (8192.0 * 8)));
    // s' = s/4 per token; the attention term's s stays whole (1/4 of the score matrix per rank).
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(split, Recompute::none),
                     sbh / 4 * (34.0 / 8 + 5.0 * 64 * 8192 / (8192.0 * 8)));
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(split, Recompute::full), 2.0 * sbh / 4);
    EXPECT_EQ(paper_layer_activation_formula(true, true, Recompute::none, 1),
              paper_layer_activation_formula(true, true, Recompute::none));
    EXPECT_NE(paper_layer_activation_formula(true, true, Recompute::none, 4).find("s'bh(34/t + 5as/(ht))"),
              std::string::npos);
}

TEST(ContextFormulas, StepTrafficCountsEveryLayerAndMicroBatchAndTheRecomputedForward) {
    const GqaShape local{2, 16, 4, 2, 8, 0, 2};  // B 2, 16 of 32 tokens, 4 query and 2 key/value heads
    const ContextSplit ring{0, 2, ContextStyle::ring, ContextBalance::zigzag};
    const TrafficByOp one = context_parallel_traffic(local, ring, 1, 1, Recompute::none);
    ASSERT_EQ(one.count("send"), 1u);
    EXPECT_EQ(one.at("send").calls, one.at("recv").calls);
    EXPECT_EQ(one.at("send").bytes, one.at("recv").bytes);
    const TrafficByOp step = context_parallel_traffic(local, ring, 3, 2, Recompute::none);
    EXPECT_DOUBLE_EQ(step.at("send").bytes, 6 * one.at("send").bytes);
    // Full recompute reruns each forward, transfers and all; selective keeps them as they are.
    const TrafficByOp full = context_parallel_traffic(local, ring, 1, 1, Recompute::full);
    EXPECT_GT(full.at("send").calls, one.at("send").calls);
    EXPECT_EQ(context_parallel_traffic(local, ring, 1, 1, Recompute::selective).at("send").calls,
              one.at("send").calls);
    // A group of one carries nothing.
    EXPECT_TRUE(context_parallel_traffic(local, ContextSplit{}, 2, 2, Recompute::none).empty());
    const ContextCounterVolume counted = context_parallel_counters(local, ring, 1, 1, Recompute::none);
    EXPECT_DOUBLE_EQ(counted.bytes_sent, one.at("send").bytes);
    EXPECT_DOUBLE_EQ(counted.messages, one.at("send").calls);
}

TEST(ContextFormulas, LocalAttentionShapeFollowsTheModelsHeads) {
    ModelConfig llama;
    llama.kind = ModelKind::llama;
    llama.hidden = 64;
    llama.heads = 4;
    llama.kv_heads = 2;
    // tp 2 splits the key/value heads; tp 4 replicates them, rank 3 reading global head 3's.
    const GqaShape split = context_local_gqa_shape(llama, 2, 8, TensorSplit{1, 2});
    EXPECT_EQ(split.NH, 2);
    EXPECT_EQ(split.NKV, 1);
    EXPECT_EQ(split.first_query_head, 0);
    const GqaShape replicated = context_local_gqa_shape(llama, 2, 8, TensorSplit{3, 4});
    EXPECT_EQ(replicated.NKV, 2);
    EXPECT_EQ(replicated.first_query_head, 3);
    EXPECT_EQ(replicated.kv_head(0), 1);
    ModelConfig gpt = llama;
    gpt.kind = ModelKind::gpt;
    const GqaShape mha = context_local_gqa_shape(gpt, 2, 8, TensorSplit{});
    EXPECT_EQ(mha.NH, 4);
    EXPECT_EQ(mha.NKV, 4);
    EXPECT_EQ(mha.T, 8);
}

}  // namespace
}  // namespace parbench

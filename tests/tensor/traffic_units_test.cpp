// The traffic formulas of src/theory/traffic.hpp on literal cases: a pipeline stage's tensor-
// parallel collectives from the layers it holds (the stages add up to the whole model), the
// pipeline transfers per rank, the data-parallel reductions per scheme, and the expert-parallel
// exchanges of MoE layers.
#include <gtest/gtest.h>

#include "theory/model_config.hpp"
#include "theory/traffic.hpp"
#include "train/model.hpp"

namespace parbench {
namespace {

ModelConfig gpt(int layers) {
    return parse_model_config({{"kind", "gpt"}, {"layers", layers}, {"hidden", 16}, {"heads", 4}, {"seq_len", 8},
                               {"vocab", 64}},
                              "literal", "test");
}

TEST(Traffic, PipelineStagesTensorTrafficAddsUpToTheWholeModel) {
    // L = 4 in two stages of 2 blocks: the first holds the embedding, the last the head.
    const ModelConfig config = gpt(4);
    for (const bool sp : {false, true}) {
        const TensorSplit split{0, 2, sp};
        const TrafficByOp whole = tensor_parallel_traffic(config, 8, 4, 2, split, whole_model_share(config));
        const TrafficByOp first = tensor_parallel_traffic(config, 8, 4, 2, split, ModelShare{2, true, false});
        const TrafficByOp last = tensor_parallel_traffic(config, 8, 4, 2, split, ModelShare{2, false, true});
        for (const auto& [op, volume] : whole) {
            const double calls = (first.count(op) ? first.at(op).calls : 0.0) + (last.count(op) ? last.at(op).calls : 0.0);
            const double bytes = (first.count(op) ? first.at(op).bytes : 0.0) + (last.count(op) ? last.at(op).bytes : 0.0);
            EXPECT_EQ(calls, volume.calls) << op << (sp ? " with SP" : "");
            EXPECT_EQ(bytes, volume.bytes) << op << (sp ? " with SP" : "");
        }
    }
    // n = 4·8·16 = 512 elements; the first stage, TP: 4 per block + the embedding's, per micro-batch.
    const TrafficByOp first = tensor_parallel_traffic(config, 8, 4, 1, TensorSplit{0, 2}, ModelShare{2, true, false});
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first.at("allreduce").calls, 4 * 2 + 1);
    EXPECT_EQ(first.at("allreduce").bytes, 4.0 * (4 * 2 + 1) * 512);
}

TEST(Traffic, PipelineTransfersPerRank) {
    // p = 2, v = 2 (virtual stages 0..3), m = 3, 100-byte boundaries, 40-byte tied embedding.
    const TrafficByOp rank0 = pipeline_traffic({0, 2}, 4, 3, 100.0, 40.0);
    // Stage 0 sends one activation and receives one gradient, stage 2 both ways: 3 per micro-batch.
    EXPECT_EQ(rank0.at("send").calls, 3.0 * 3);
    EXPECT_EQ(rank0.at("recv").bytes, 3.0 * 3 * 100.0);
    EXPECT_EQ(rank0.at("sendrecv").calls, 1.0);
    EXPECT_EQ(rank0.at("sendrecv").bytes, 40.0);
    const TrafficByOp middle = pipeline_traffic({1}, 3, 2, 100.0, 0.0);
    EXPECT_EQ(middle.at("send").calls, 2.0 * 2);
    EXPECT_EQ(middle.count("sendrecv"), 0u);
    EXPECT_TRUE(pipeline_traffic({0}, 1, 4, 100.0, 0.0).empty());
}

TEST(Traffic, DataParallelReductionsPerScheme) {
    const ModelConfig config = gpt(2);
    const ParameterLayout layout = model_parameter_layout(config, 8);
    const std::vector<int> use_order{0, 1, 2, 0, 2, 1};
    const double bytes = static_cast<double>(layout.total_numel()) * 4.0;
    SchemeSettings scheme;
    scheme.microbatches = 2;
    EXPECT_TRUE(data_parallel_traffic(layout, 1, scheme, use_order).empty()) << "a group of one carries nothing";
    const TrafficByOp ddp = data_parallel_traffic(layout, 2, scheme, use_order);  // one 25 MiB bucket
    ASSERT_EQ(ddp.size(), 1u);
    EXPECT_EQ(ddp.at("allreduce").calls, 1.0);
    EXPECT_EQ(ddp.at("allreduce").bytes, bytes);
    scheme.zero_stage = 2;
    const TrafficByOp zero2 = data_parallel_traffic(layout, 2, scheme, use_order);
    EXPECT_EQ(zero2.at("reducescatter").calls, 2.0);  // per micro-batch
    EXPECT_EQ(zero2.at("allgather").calls, 1.0);
    EXPECT_GE(zero2.at("allgather").bytes, bytes);    // padded to two shards
    scheme.zero_stage = 3;
    const TrafficByOp zero3 = data_parallel_traffic(layout, 2, scheme, use_order);
    EXPECT_EQ(zero3.at("allgather").calls, 2.0 * 6);  // every use, every micro-batch
    EXPECT_EQ(zero3.at("reducescatter").calls, 2.0 * 3);
    EXPECT_TRUE(traffic_matches(zero3, zero3));
    EXPECT_FALSE(traffic_matches(zero3, zero2));
}

// Expert parallelism, by hand: 2 MoE layers of E 4, k 2, hidden 32 on the rank, 16 tokens per
// micro-batch, 3 micro-batches, ep 2. Per layer and micro-batch one counts' alltoall of 4 int32
// and 4 alltoallv of 16 x 2 rows of 32 floats (4096 B); full recompute adds a forward's 1 + 2.
TEST(Traffic, ExpertParallelExchangesByHand) {
    ModelConfig model;
    model.kind = ModelKind::llama;
    model.layers = 3;
    model.hidden = 32;
    model.moe = ModelConfig::Moe{};
    model.moe->experts = 4;
    model.moe->top_k = 2;
    model.moe->expert_hidden = 8;
    ModelShare share{3, true, true, 2};
    const TrafficByOp plain = expert_parallel_traffic(model, 16, 3, 2, share);
    EXPECT_DOUBLE_EQ(plain.at("alltoall").calls, 6.0);
    EXPECT_DOUBLE_EQ(plain.at("alltoall").bytes, 6.0 * 16);
    EXPECT_DOUBLE_EQ(plain.at("alltoallv").calls, 24.0);
    EXPECT_DOUBLE_EQ(plain.at("alltoallv").bytes, 24.0 * 4096);
    const TrafficByOp recomputed = expert_parallel_traffic(model, 16, 3, 2, share, Recompute::full);
    EXPECT_DOUBLE_EQ(recomputed.at("alltoall").calls, 12.0);
    EXPECT_DOUBLE_EQ(recomputed.at("alltoallv").calls, 36.0);
    EXPECT_TRUE(expert_parallel_traffic(model, 16, 3, 1, share).empty());  // no ep group
    share.moe_layers = 0;
    EXPECT_TRUE(expert_parallel_traffic(model, 16, 3, 2, share).empty());  // no MoE layer on the rank
}

}  // namespace
}  // namespace parbench

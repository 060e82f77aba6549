// plan's compute model against hand-computed cases: one layer's GEMMs and element-wise bytes per
// pass (theory/layer_work.hpp), the device's GEMM curve and its fit (plan/device_compute.hpp),
// recompute's time, ZeRO-3's per-layer overlap (plan/layout_plan.hpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "core/error.hpp"
#include "plan/device_compute.hpp"
#include "plan/layout_comm.hpp"
#include "plan/layout_plan.hpp"
#include "plan/stage_compute.hpp"
#include "plan/tp_comm_overlap.hpp"
#include "theory/layer_work.hpp"
#include "theory/model_layout.hpp"
#include "theory/pipeline/partition.hpp"

namespace parbench {
namespace {

ModelConfig hand_gpt() {
    ModelConfig model;
    model.name = "hand";
    model.kind = ModelKind::gpt;
    model.layers = 4;
    model.hidden = 1024;
    model.heads = 16;
    model.seq_len = 512;
    model.vocab = 8192;
    return model;
}

// h 1024, 16 heads, s 512, micro-batch 2, tp 2, bf16: 1024 tokens on each rank.
LayerWorkShape small_shape(bool sp = false) {
    LayerWorkShape shape;
    shape.model = hand_gpt();
    shape.seq = 512;
    shape.keys = 512;
    shape.micro = 2;
    shape.tp = 2;
    shape.sp = sp;
    shape.element_bytes = 2;
    return shape;
}

TEST(LayerWork, NaiveGemmFlopsAreMegatronsPerRank) {
    const LayerWork w = transformer_layer_work(small_shape(), AttentionKind::naive, Recompute::none);
    // Linear: 24 T h^2 / t = 24 x 1024 x 1024^2 / 2; attention: 4 b s^2 h / t = 4 x 2 x 512^2 x 1024 / 2.
    EXPECT_DOUBLE_EQ(w.forward.flops(), 12884901888.0 + 1073741824.0);
    // dx of the four linears, and dP, dV, dQ, dK (each the size of the scores product).
    EXPECT_DOUBLE_EQ(w.input_grad.flops(), 12884901888.0 + 2147483648.0);
    EXPECT_DOUBLE_EQ(w.weight_grad.flops(), 12884901888.0);
    EXPECT_DOUBLE_EQ(w.recompute.flops(), 0.0);
}

TEST(LayerWork, NaiveElementwiseBytes) {
    const LayerWork w = transformer_layer_work(small_shape(), AttentionKind::naive, Recompute::none);
    // Scores S = 16/2 heads x 2 x 512^2 = 4,194,304: softmax 2S x 2 B, dropout 2S x 2 B + S mask.
    const double scores = 9.0 * 4194304;
    // N = 1024 x 1024 hidden elements: two LayerNorms 2N x 2 B, two bias-dropout-adds (3N x 2 B +
    // N); GeLU on 1024 x 4096 / 2: read, write x 2 B.
    const double hidden = 22.0 * 1048576 + 4.0 * 2097152;
    EXPECT_DOUBLE_EQ(w.forward.memory_bytes, scores + hidden);
    EXPECT_DOUBLE_EQ(w.input_grad.memory_bytes, 1.5 * (scores + hidden));
}

TEST(LayerWork, SequenceParallelSplitsTheElementwiseWork) {
    const LayerWork w = transformer_layer_work(small_shape(true), AttentionKind::flash, Recompute::none);
    EXPECT_DOUBLE_EQ(w.forward.memory_bytes, 11.0 * 1048576 + 4.0 * 2097152);
}

TEST(LayerWork, FlashHalvesCausalScoresAndRecomputesThemInBackward) {
    const LayerWork w = transformer_layer_work(small_shape(), AttentionKind::flash, Recompute::none);
    EXPECT_DOUBLE_EQ(w.forward.flops(), 12884901888.0 + 536870912.0);
    // Five products of 268,435,456 FLOPs each: the scores again, dP, dV, dQ, dK.
    EXPECT_DOUBLE_EQ(w.input_grad.flops(), 12884901888.0 + 5.0 * 268435456.0);
    EXPECT_DOUBLE_EQ(w.forward.memory_bytes, 22.0 * 1048576 + 4.0 * 2097152);  // no s x s tensor
}

// A deep MLP has no heads or sequence: its layer is one linear layer and its GELU, all finite
// (heads = 0 once made every MLP plan's compute NaN).
TEST(LayerWork, MlpLayerIsOneLinearAndItsGelu) {
    LayerWorkShape shape;
    shape.model.kind = ModelKind::mlp;
    shape.model.hidden = 64;
    shape.micro = 8;
    shape.tp = 2;
    shape.element_bytes = 4;
    const LayerWork work = mlp_layer_work(shape);
    const double product = 2.0 * 8 * 64 * 32;  // 8 samples x 64 inputs x 32 outputs on each rank
    EXPECT_DOUBLE_EQ(work.forward.flops(), product);
    EXPECT_DOUBLE_EQ(work.input_grad.flops(), product);
    EXPECT_DOUBLE_EQ(work.weight_grad.flops(), product);
    EXPECT_DOUBLE_EQ(work.forward.memory_bytes, 2.0 * 8 * 32 * 4);
}

TEST(LayerWork, RecomputeRepeatsTheForwardItDropped) {
    const LayerWork full = transformer_layer_work(small_shape(), AttentionKind::naive, Recompute::full);
    EXPECT_DOUBLE_EQ(full.recompute.flops(), full.forward.flops());
    EXPECT_DOUBLE_EQ(full.recompute.memory_bytes, full.forward.memory_bytes);
    const LayerWork selective = transformer_layer_work(small_shape(), AttentionKind::naive, Recompute::selective);
    EXPECT_DOUBLE_EQ(selective.recompute.flops(), 1073741824.0);
    EXPECT_DOUBLE_EQ(selective.recompute.memory_bytes, 9.0 * 4194304);
    // Flash keeps no scores to drop: selective recompute repeats nothing.
    EXPECT_DOUBLE_EQ(transformer_layer_work(small_shape(), AttentionKind::flash, Recompute::selective).recompute.flops(),
                     0.0);
    EXPECT_THROW(parse_attention("fast"), UsageError);
}

DeviceCompute hand_device() {
    DeviceCompute d;
    d.peak_tflops = 100;
    d.gemm = {0.5, 10.0, "hand"};
    d.memory_gbps = 1000;
    d.memory_fraction = 0.8;
    return d;
}

TEST(DeviceCompute, GemmCurveAndMemoryTime) {
    const DeviceCompute d = hand_device();
    // 1 TFLOP at 50 TFLOP/s is 20 ms, plus 10 us.
    EXPECT_DOUBLE_EQ(d.gemm_ms(Gemm{"g", 1e4, 1e4, 5e3, 1}), 20.01);
    EXPECT_NEAR(d.efficiency(1e12), 1e12 / (20.01e-3 * 1e14), 1e-12);
    EXPECT_LT(d.efficiency(1e9), d.efficiency(1e12));  // small GEMMs run further below peak
    EXPECT_DOUBLE_EQ(d.memory_ms(1e9), 1.25);           // 1 GB at 800 GB/s
}

TEST(DeviceCompute, FitsTheCurveToAnOpsReport) {
    // Two matmuls on the hand device: 1 GFLOP in 30 us, 10 GFLOP in 210 us.
    const std::string path = ::testing::TempDir() + "/gemm_curve_ops.json";
    {
        std::ofstream out(path);
        out << R"({"benchmarks": [
          {"name": "gpu/sweep/matmul_1", "run_type": "iteration", "real_time": 30, "time_unit": "us", "FLOP/s": 3.3333333333333336e13},
          {"name": "gpu/sweep/matmul_10", "run_type": "iteration", "real_time": 210, "time_unit": "us", "FLOP/s": 4.761904761904762e13},
          {"name": "gpu/sweep/layernorm", "run_type": "iteration", "real_time": 5, "time_unit": "us", "bytes/s": 1e12}]})";
    }
    const GemmCurve curve = fit_gemm_curve(path, 100);
    EXPECT_NEAR(curve.sustained, 0.5, 1e-9);
    EXPECT_NEAR(curve.overhead_us, 10.0, 1e-6);
    std::remove(path.c_str());
    EXPECT_THROW(fit_gemm_curve(path, 100), UsageError);
}

TEST(DeviceCompute, EachDeviceTakesTheCurveItNamesOrItsOwnOrNone) {
    // Presets: each its own curve; H200 is the H100 die (sm_90), B200 its own (sm_100).
    const DeviceCompute h100 = *device_compute_model(device_preset("H100"), true);
    const DeviceCompute h200 = *device_compute_model(device_preset("H200"), true);
    const DeviceCompute b200 = *device_compute_model(device_preset("B200"), true);
    EXPECT_EQ(h100.gemm.sustained, h200.gemm.sustained);
    EXPECT_NE(h100.gemm.sustained, b200.gemm.sustained);
    EXPECT_NE(h100.gemm.sustained, device_compute_model(device_preset("A100"), true)->gemm.sustained);
    EXPECT_EQ(h200.memory_gbps, device_preset("H200").memory_bandwidth_gbps);  // its own HBM
    // A cluster file's device: the preset it names, its own numbers over it, its own alone, none.
    DeviceSpec file = device_preset("A100");
    file.name = "A100-SXM4-80GB (Selene)";
    file.source = "--cluster selene.json";
    const DeviceCompute named = *device_compute_model(file, true);
    EXPECT_EQ(named.gemm.sustained, device_compute_model(device_preset("A100"), true)->gemm.sustained);
    EXPECT_NE(named.gemm.source.find("--cluster selene.json takes the A100"), std::string::npos);
    // A preset's curve is a measurement of GEMMs alone, taken into a step by the one in-step
    // factor (the same on every preset); a file's own figure is taken as the in-step rate.
    EXPECT_LT(named.in_step, 1.0);
    EXPECT_EQ(named.in_step, h100.in_step);
    EXPECT_EQ(h100.in_step, b200.in_step);
    Gemm big{"g", 8192, 8192, 8192, 1};
    DeviceCompute alone = h100;
    alone.in_step = 1.0;
    EXPECT_NEAR(h100.gemm_ms(big) - h100.gemm.overhead_us * 1e-3,
                (alone.gemm_ms(big) - h100.gemm.overhead_us * 1e-3) / h100.in_step, 1e-9);
    file.gemm_sustained = 0.6;
    EXPECT_EQ(device_compute_model(file, true)->gemm.sustained, 0.6);
    EXPECT_EQ(device_compute_model(file, true)->in_step, 1.0);
    EXPECT_EQ(device_compute_model(file, true)->gemm.overhead_us, named.gemm.overhead_us);
    file.gemm_preset.clear();
    EXPECT_EQ(device_compute_model(file, true)->gemm.overhead_us, 0.0);  // its own curve, no overhead given
    file.gemm_sustained = 0.0;
    EXPECT_FALSE(device_compute_model(file, true).has_value());
    try {
        resolve_device_compute(file, true, "", file.source);
        FAIL() << "a device with no curve was planned";
    } catch (const UsageError& e) {
        const std::string message = e.what();
        for (const char* needle : {"--cluster selene.json", "A100-SXM4-80GB (Selene)", "gemm_preset", "gemm_sustained",
                                   "--gemm-curve"})
            EXPECT_NE(message.find(needle), std::string::npos) << needle << " missing in: " << message;
    }
}

TEST(StageCompute, FullRecomputeAddsEachLayersForward) {
    Layout l;
    l.model = hand_gpt();
    l.seq_len = 512;
    l.microbatch_size = 2;
    l.tp = 2;
    l.precision = Precision::bf16;
    const DeviceCompute d = hand_device();
    const StageCompute none = stage_compute(l, AttentionKind::naive, d).front();
    l.recompute = Recompute::full;
    const StageCompute full = stage_compute(l, AttentionKind::naive, d).front();
    const LayerWork layer = transformer_layer_work(small_shape(), AttentionKind::naive, Recompute::none);
    EXPECT_NEAR(full.recompute_ms, 4 * d.pass_ms(layer.forward), 1e-9);
    EXPECT_NEAR(full.total_ms() - none.total_ms(), 4 * d.pass_ms(layer.forward), 1e-9);
    EXPECT_DOUBLE_EQ(none.recompute_ms, 0.0);
}

TEST(StageCompute, AMeasuredOneRankRunSetsTheCurvesLevel) {
    // The plan's layout is 2 pipeline stages of micro-batches of 2; the run, one rank with one
    // micro-batch of 4. Scaled, the device model prices the run at its measured step.
    Layout plan;
    plan.model = hand_gpt();
    plan.seq_len = 512;
    plan.pp = 2;
    plan.microbatches = 4;
    plan.microbatch_size = 2;
    plan.precision = Precision::bf16;
    ComputeRate::MeasuredRun run{"hand", 1, 4, 1, "none", 500.0};
    const double gbps = 100;
    DeviceCompute d = hand_device();
    const double scale = measured_step_scale(d, plan, AttentionKind::naive, run, gbps);
    Layout one = plan;
    one.pp = 1;
    one.microbatches = 1;
    one.microbatch_size = 4;
    const double optimizer_ms =
        static_cast<double>(model_parameter_layout(one.model, one.seq_len).total_numel()) * 28.0 / (gbps * 1e9) * 1e3;
    d.step_scale = scale;
    EXPECT_NEAR(stage_compute(one, AttentionKind::naive, d).front().total_ms() + optimizer_ms, 500.0, 1e-9);
    run.ranks = 2;  // a run's step with communication in it is no compute measurement
    EXPECT_THROW(measured_step_scale(d, plan, AttentionKind::naive, run, gbps), UsageError);
    run.ranks = 1;
    run.model = "other";
    EXPECT_THROW(measured_step_scale(d, plan, AttentionKind::naive, run, gbps), UsageError);
}

TEST(DeviceCompute, ABackwardEntryIsTwoGemmsAndSmallOnesCountAsMuch) {
    // 100 TFLOP/s at 0.5 and 10 us per call: 1 GFLOP forward 30 us, 2 GFLOP backward (two
    // calls) 60 us, 100 GFLOP forward 2010 us.
    const std::string path = ::testing::TempDir() + "/gemm_curve_calls.json";
    {
        std::ofstream out(path);
        out << R"({"benchmarks": [
          {"name": "gpu/x/matmul_a_forward", "real_time": 30, "time_unit": "us", "FLOP/s": 3.3333333333333336e13},
          {"name": "gpu/x/matmul_a_backward", "real_time": 60, "time_unit": "us", "FLOP/s": 3.3333333333333336e13},
          {"name": "gpu/x/matmul_b_forward", "real_time": 2010, "time_unit": "us", "FLOP/s": 4.975124378109453e13}]})";
    }
    const GemmCurve curve = fit_gemm_curve(path, 100);
    EXPECT_NEAR(curve.sustained, 0.5, 1e-9);
    EXPECT_NEAR(curve.overhead_us, 10.0, 1e-6);
    std::remove(path.c_str());
}

TEST(TpCommOverlap, PricedAsTransformerEnginesDefaultsRunIt) {
    const TpOverlapDevice ideal{};  // no SM count, no per-chunk overhead
    // All-gather, ring exchange over 4 ranks: a 10 ms GEMM in chunks of 2.5 ms, the first on the
    // rank's own shard; 3 steps of 4/3 ms hide behind the other three: nothing exposed. 16 ms: 3
    // steps of 16/3 ms after the first chunk, 8.5 ms beyond the GEMM.
    EXPECT_DOUBLE_EQ(tp_overlap_allgather_exposed_ms(10, 4, 4, ideal), 0.0);
    EXPECT_DOUBLE_EQ(tp_overlap_allgather_exposed_ms(10, 16, 4, ideal), 8.5);
    EXPECT_DOUBLE_EQ(tp_overlap_allgather_exposed_ms(10, 4, 1, ideal), 4.0);  // one rank: nothing overlaps
    // Each of the 3 chunks beyond the first pays the GEMM's per-call overhead.
    EXPECT_NEAR(tp_overlap_allgather_exposed_ms(10, 4, 4, {0, 0.1}), 0.3, 1e-12);
    // Reduce-scatter, pipelined in 4: the last quarter's 1 ms exposed; with 16 of 132 SMs taken
    // by the communication the GEMM runs 132/116 as long.
    EXPECT_DOUBLE_EQ(tp_overlap_reducescatter_exposed_ms(10, 4, 8, ideal), 1.0);
    EXPECT_DOUBLE_EQ(tp_overlap_reducescatter_exposed_ms(10, 16, 8, ideal), 8.5);
    EXPECT_NEAR(tp_overlap_reducescatter_exposed_ms(10, 4, 8, {132, 0}), 10.0 * 132 / 116 + 1 - 10, 1e-12);
    // A step of equal pairs: the same per pair.
    EXPECT_DOUBLE_EQ(
        tp_overlap_step({{TeOverlap::ring_exchange, 10, 4}, {TeOverlap::pipeline, 10, 4}}, 16, 4, 16, 4, 4, ideal).exposed_ms,
        4 * 0.0 + 4 * 1.0);
}

// TE's bulk overlap (qkv/fc1 dgrad and wgrad): one collective on 16 SMs beside one unsplit GEMM
// on the other SMs; no chunks, no exposed last chunk.
TEST(TpCommOverlap, BulkRunsOneCollectiveBesideOneUnsplitGemm) {
    EXPECT_DOUBLE_EQ(tp_overlap_bulk_exposed_ms(10, 4, {}), 0.0);   // hidden whole
    EXPECT_DOUBLE_EQ(tp_overlap_bulk_exposed_ms(10, 16, {}), 6.0);  // the collective outlasts the GEMM
    // 132 SMs, 16 taken: the GEMM runs 10 x 132/116 = 11.379 ms; the chunk overhead is not paid.
    EXPECT_NEAR(tp_overlap_bulk_exposed_ms(10, 4, {132, 0.1}), 10.0 * 132 / 116 - 10, 1e-12);
    EXPECT_DOUBLE_EQ(tp_overlap_bulk_exposed_ms(10, 12, {132, 0.1}), 2.0);
}

// TE's initialize_ub methods per GEMM, on one transformer layer's work: 10 of its 12 linear GEMMs
// carry a collective (4 ring-exchange all-gathers, 2 pipelined reduce-scatters, 2 bulk
// all-gathers, 2 bulk reduce-scatters); the projection's and fc2's weight gradients none.
TEST(TpCommOverlap, EachLinearGemmTakesTransformerEnginesMethod) {
    const LayerWork work = transformer_layer_work(small_shape(true), AttentionKind::flash, Recompute::none);
    std::map<TeOverlap, int> methods;
    int unpaired = 0;
    for (const PassWork* pass : {&work.forward, &work.input_grad, &work.weight_grad})
        for (const Gemm& g : pass->gemms) {
            if (g.role != GemmRole::linear && g.role != GemmRole::linear_weight_grad) continue;
            if (const auto method = te_overlap_of(g.name)) ++methods[*method];
            else ++unpaired;
        }
    EXPECT_EQ(methods[TeOverlap::ring_exchange], 4);
    EXPECT_EQ(methods[TeOverlap::pipeline], 2);
    EXPECT_EQ(methods[TeOverlap::bulk_all_gather], 2);
    EXPECT_EQ(methods[TeOverlap::bulk_reduce_scatter], 2);
    EXPECT_EQ(unpaired, 2);
    EXPECT_EQ(te_overlap_of("qkv"), TeOverlap::ring_exchange);
    EXPECT_EQ(te_overlap_of("attention projection"), TeOverlap::pipeline);
    EXPECT_EQ(te_overlap_of("qkv dx"), TeOverlap::bulk_all_gather);
    EXPECT_EQ(te_overlap_of("mlp up dW"), TeOverlap::bulk_reduce_scatter);
    EXPECT_FALSE(te_overlap_of("mlp down dW").has_value());
    EXPECT_FALSE(te_overlap_of("logits").has_value());
    // The stage's pairs hold those 10 per layer (4 layers), none for the embedding or the logits.
    const DeviceCompute device = hand_device();
    Layout l;
    l.model = hand_gpt();
    l.seq_len = 512;
    l.microbatch_size = 2;
    l.tp = 2;
    l.sp = true;
    l.precision = Precision::bf16;
    double pairs = 0;
    for (const TpOverlapGemm& gemm : stage_compute(l, AttentionKind::flash, device).front().tp_overlap_gemms)
        pairs += gemm.count;
    EXPECT_DOUBLE_EQ(pairs, 10.0 * 4);
}

// Each pair at its own GEMM's size; collectives beyond the pairs exposed whole. tp 4, no SM
// margin or chunk overhead; every all-gather 3 ms, every reduce-scatter 4 ms.
TEST(TpCommOverlap, EachPairAtItsOwnGemmAndTheRestExposed) {
    const std::vector<TpOverlapGemm> pairs = {
        {TeOverlap::ring_exchange, 2, 1},  // chunks of 0.5, steps of 1: 0.5 + 3 x 1 = 3.5, 1.5 beyond
        {TeOverlap::ring_exchange, 8, 1},  // chunks of 2 hide steps of 1: 0
        {TeOverlap::pipeline, 8, 1},       // quarters of 2, the last 1 ms quarter exposed: 1
        {TeOverlap::bulk_reduce_scatter, 2, 1},  // max(2, 4) - 2: 2
    };
    // 3 all-gathers (1 unpaired: 3), 2 reduce-scatters (all paired): 1.5 + 0 + 1 + 2 + 3.
    const TpOverlapStep step = tp_overlap_step(pairs, 9, 3, 8, 2, 4, {});
    EXPECT_DOUBLE_EQ(step.exposed_ms, 7.5);
    // Hidden on SMs: the pipeline's 4 - 1 and the bulk pair's 4 - 2; not the ring exchanges' (copy engines).
    EXPECT_DOUBLE_EQ(step.hidden_on_sms_ms, 3.0 + 2.0);
    // Pairs beyond the collectives pair nothing.
    EXPECT_DOUBLE_EQ(tp_overlap_step(pairs, 3, 1, 0, 0, 4, {}).exposed_ms, 1.5);
    // No pairs: every collective exposed.
    EXPECT_DOUBLE_EQ(tp_overlap_step({}, 9, 3, 8, 2, 4, {}).exposed_ms, 17.0);
}

TEST(DeviceCompute, FusedAttentionRunsAtItsKernelsRate) {
    DeviceCompute d = hand_device();
    Gemm fused{"scores", 4096, 4096, 128, 32, 0, GemmRole::fused_attention_forward};
    const double on_curve = d.gemm_ms(fused);
    d.attention = {0.25, 0.2, "test"};
    // 0.25 of the 100 TFLOP/s peak, plus the call's overhead.
    EXPECT_NEAR(d.gemm_ms(fused), fused.flops() / 25e12 * 1e3 + 0.01, 1e-9);
    EXPECT_GT(d.gemm_ms(fused), on_curve);
    fused.role = GemmRole::fused_attention_backward;
    EXPECT_NEAR(d.gemm_ms(fused), fused.flops() / 20e12 * 1e3 + 0.01, 1e-9);
    // The H100 preset runs flash attention at cuDNN's measured rate, below its GEMM curve.
    const DeviceCompute h100 = *device_compute_model(device_preset("H100"), true);
    EXPECT_LT(h100.attention.forward, h100.gemm.sustained);
    EXPECT_LT(h100.attention.backward, h100.attention.forward);
}

TEST(DeviceCompute, Fp8LinearLayersRunAtTheFp8CurveAfterCastingTheirActivations) {
    DeviceCompute d = hand_device();
    d.fp8_peak_tflops = 200;
    d.fp8 = {0.5, 10.0, "hand fp8"};
    const Gemm forward{"fc", 1e4, 1e4, 5e3, 1};  // 1 TFLOP
    const Gemm weight_grad{"fc dW", 1e4, 1e4, 5e3, 1, 2, GemmRole::linear_weight_grad};
    const Gemm attention{"scores", 1e4, 1e4, 5e3, 1, 2, GemmRole::attention};
    const double bf16_ms = d.gemm_ms(forward);
    d.fp8_linear = true;
    // 1 TFLOP at 100 TFLOP/s, 10 us, and the cast of its 1e4 x 5e3 input (3 B each at 800 GB/s).
    EXPECT_NEAR(d.gemm_ms(forward), 10.0 + 0.01 + 1.5e8 / 8e11 * 1e3, 1e-9);
    EXPECT_NEAR(d.gemm_ms(weight_grad), 10.01, 1e-9);  // its operands were cast already
    EXPECT_DOUBLE_EQ(d.gemm_ms(attention), bf16_ms);  // attention stays bf16
    EXPECT_LT(d.gemm_ms(forward), bf16_ms);
}

TEST(Zero3Overlap, NextGatherHidesBehindOneLayerAndNoMore) {
    // 4 gathers of 10 ms (2 units, gathered for forward and again for backward), 2 reduce-scatters
    // of 10 ms; forward 16 ms (8 per unit), backward 30 ms (15 per unit).
    // Forward: 10 + (10 - 8) = 12. Backward: 10 + (10 + 10 - 15) + 10 = 25.
    EXPECT_DOUBLE_EQ(zero3_exposed_ms(40, 4, 20, 2, 16, 30), 37.0);
    // Compute long enough to hide everything but the first gather and the last reduce-scatter.
    EXPECT_DOUBLE_EQ(zero3_exposed_ms(40, 4, 20, 2, 100, 100), 30.0);
    // No reshard after forward: 2 gathers of 10 ms; the backward only reduce-scatters.
    // Forward 10 + (10 - 8) = 12; backward: the first reduce-scatter hides behind 15 ms, the last
    // is exposed: 10.
    EXPECT_DOUBLE_EQ(zero3_exposed_ms(20, 2, 20, 2, 16, 30, false), 22.0);
}

}  // namespace
}  // namespace parbench

namespace parbench {
namespace {

TEST(InterleavedMemory, MegatronHoldsOnePlusPMinusOneOverPVLayers) {
    // 96 layers, p 8, v 2, 64 micro-batches: rank 0 warms up 2 x 7 + 8 = 22 chunks, holds 23 of 6
    // layers = 138 = 96 x (1 + 7/16).
    EXPECT_DOUBLE_EQ(megatron_interleaved_layers_in_flight(96, 8, 2, 64, 0, 999), 138.0);
    // The last rank: (v - 1) x p + 1 = 9 chunks of 6.
    EXPECT_DOUBLE_EQ(megatron_interleaved_layers_in_flight(96, 8, 2, 64, 7, 999), 54.0);
    // Few micro-batches: at most m x v chunks.
    EXPECT_DOUBLE_EQ(megatron_interleaved_layers_in_flight(96, 8, 2, 2, 0, 999), 24.0);
    // Layers that do not split evenly keep the engine's count.
    EXPECT_DOUBLE_EQ(megatron_interleaved_layers_in_flight(126, 16, 2, 64, 0, 999), 999.0);
}

}  // namespace
}  // namespace parbench

namespace parbench {
namespace {

// The hand tests' machine: `gpus` A100s, and a compute rate of 100 TFLOP/s per GPU.
ClusterSpec a100_cluster(int gpus) {
    ClusterSpec cluster;
    cluster.device = device_preset("A100");
    cluster.gpus = gpus;
    return cluster;
}

ComputeRate hundred_tflops() {
    ComputeRate rate;
    rate.tflops_per_gpu = 100;
    return rate;
}

PlanLayout hand_layout() {
    PlanLayout p;
    p.states = StateConvention::zero;
    Layout& l = p.engine;
    l.model = hand_gpt();
    l.seq_len = 512;
    l.precision = Precision::bf16;
    return p;
}

TEST(FsdpForms, NoReshardHoldsTheGatheredParametersAndHybridShardsInsideAHost) {
    PlanLayout p = hand_layout();
    p.engine.dp = 4;
    p.engine.zero = 3;
    const PlanMemory sharded = plan_memory(p);
    const double psi = sharded.params / 2.0 * 4;  // ZeRO's 2 B per parameter, over dp 4
    p.reshard_after_forward = false;
    const PlanMemory kept = plan_memory(p);
    EXPECT_DOUBLE_EQ(kept.buffers - sharded.buffers, 2.0 * psi - sharded.params);  // every layer gathered
    p.reshard_after_forward = true;
    p.shard_group = 2;
    const PlanMemory hybrid = plan_memory(p);
    EXPECT_DOUBLE_EQ(hybrid.params, 2.0 * sharded.params);  // sharded over 2 ranks, not 4
    EXPECT_DOUBLE_EQ(hybrid.optimizer, 2.0 * sharded.optimizer);
}

TEST(FsdpForms, PerParameterShardingCopiesEachGatheredAndReducedByteOnce) {
    PlanLayout p = hand_layout();
    p.engine.dp = 4;
    p.engine.zero = 3;
    p.engine.overlap = p.engine.prefetch = true;
    p.engine.global_batch = 4;
    p.engine.microbatch_size = 1;
    ClusterSpec cluster = a100_cluster(4);
    const PlanContext context{cluster, CommModel(cluster), hundred_tflops(), PassCosts{}, false, true, std::nullopt};
    const PlanPrediction fsdp = predict_layout(p, context);
    double copied = 0;
    for (const CommLine& line : fsdp.comm)
        if (line.dimension == "dp" && (line.collective == "allgather" || line.collective == "reducescatter"))
            copied += 2.0 * line.bytes;
    EXPECT_GT(copied, 0.0);
    EXPECT_NEAR(fsdp.fsdp_copy_ms, copied / (cluster.device.memory_bandwidth_gbps * 0.8e9) * 1e3, 1e-9);
    p.engine.zero = 1;  // ZeRO-1 gathers into its flat buffer: no copies
    EXPECT_DOUBLE_EQ(predict_layout(p, context).fsdp_copy_ms, 0.0);
}

double prediction_send_bytes(const PlanPrediction& prediction) {
    for (const CommLine& line : prediction.comm)
        if (line.dimension == "pp" && line.collective == "send") return line.bytes;
    return 0;
}

TEST(PipelineTransfers, AcrossHostsScatterOverTpThenGatherInside) {
    PlanLayout p = hand_layout();
    Layout& l = p.engine;
    l.tp = 8;
    l.pp = 2;
    l.microbatches = 2;
    l.stage_ranges = virtual_stage_layers(4, 2, 1, {});
    p.engine.global_batch = 2;
    ClusterSpec cluster = a100_cluster(16);
    cluster.gpus_per_host = 8;
    const ComputeRate rate = hundred_tflops();
    const PlanContext context{cluster, CommModel(cluster), rate, PassCosts{}, false, true, std::nullopt};
    const PlanPrediction prediction = predict_layout(p, context);
    bool found = false;
    for (const CommLine& line : prediction.comm) {
        if (line.dimension != "pp" || line.collective != "send") continue;
        const double each = line.bytes / line.calls;
        const double expected = line.calls *
                                (context.comm.time_us("sendrecv", each / 8, 2, Placement::cross_host) +
                                 context.comm.time_us("allgather", each, 8, Placement::intra_host)) / 1e3;
        EXPECT_DOUBLE_EQ(line.time_ms, expected);
        found = true;
    }
    EXPECT_TRUE(found);
    // Sequence parallel: each tp rank's send is its s/t shard already (an eighth of the whole
    // activation here), one cross-host transfer with no scatter and no gather (the
    // scatter divided the shard by t again).
    l.sp = true;
    const PlanPrediction shards = predict_layout(p, context);
    found = false;
    for (const CommLine& line : shards.comm) {
        if (line.dimension != "pp" || line.collective != "send") continue;
        const double each = line.bytes / line.calls;
        EXPECT_DOUBLE_EQ(each * 8, prediction_send_bytes(prediction) / line.calls);
        EXPECT_DOUBLE_EQ(line.time_ms, line.calls * context.comm.time_us("sendrecv", each, 2, Placement::cross_host) / 1e3);
        found = true;
    }
    EXPECT_TRUE(found);
}

// A framework's job cannot use the whole HBM: the caching allocator's reserve and the runtime keep
// memory_reserved_gib of it (GMLake, arXiv 2401.08156). The zero and megatron conventions fit in
// what is left; parbench's convention, which counts its own engine's buffers, keeps the whole.
TEST(MemoryReserve, FrameworkConventionsFitInTheHbmLessTheReserve) {
    ClusterSpec cluster;
    cluster.device = device_preset("A100");
    EXPECT_NEAR(cluster.device.memory_reserved_gib, 9.2e9 / (1u << 30), 1e-9);
    cluster.gpus = 8;
    const ComputeRate rate = hundred_tflops();
    const PlanContext context{cluster, CommModel(cluster), rate, PassCosts{}, false, true, std::nullopt};
    PlanLayout p = hand_layout();
    p.engine.dp = 2;
    p.engine.global_batch = 2;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const PlanPrediction zero = predict_layout(p, context);
    EXPECT_DOUBLE_EQ(zero.memory_reserved, cluster.device.memory_reserved_gib * gib);
    EXPECT_DOUBLE_EQ(zero.memory_capacity, (80.0 - cluster.device.memory_reserved_gib) * gib);
    // A layout that needs more than what is left does not fit, though it is below 80 GiB.
    ClusterSpec small = cluster;
    small.device.memory_gib = zero.memory.total / gib + 1.0;
    small.device.memory_reserved_gib = 2.0;
    const PlanContext tight{small, CommModel(small), rate, PassCosts{}, false, true, std::nullopt};
    EXPECT_FALSE(predict_layout(p, tight).fits);
    small.device.memory_reserved_gib = 0.5;
    const PlanContext roomy{small, CommModel(small), rate, PassCosts{}, false, true, std::nullopt};
    EXPECT_TRUE(predict_layout(p, roomy).fits);
    p.states = StateConvention::parbench;
    p.engine.precision = Precision::fp32;
    EXPECT_EQ(predict_layout(p, context).memory_reserved, 0.0);
}

TEST(MemoryReserve, AClusterFileReserveAtOrAboveTheHbmIsRefusedNamingTheKey) {
    const nlohmann::json document = nlohmann::json::parse(
        R"({"device": {"peak_tflops_bf16": 100, "memory_gib": 16, "memory_reserved_gib": 16,
            "intra_host": {"latency_us": 1, "busbw_gbps": 10}, "cross_host": {"latency_us": 1, "busbw_gbps": 1}},
            "gpus": 8})");
    try {
        parse_cluster(document, "--cluster c.json");
        FAIL() << "accepted a reserve equal to the HBM";
    } catch (const UsageError& error) {
        EXPECT_NE(std::string(error.what()).find("memory_reserved_gib"), std::string::npos) << error.what();
    }
}

// NCCL runs all-gather and reduce-scatter as rings: each of the n - 1 steps adds its hop's
// latency (src/graph/tuning.cc), so a call across 128 hosts waits milliseconds, where the
// per-call figure alone said 20 us. All-reduce (NCCL's tree across hosts) and calibrated fits
// keep their own alpha.
TEST(RingLatency, CrossHostGathersAddAStepPerRank) {
    ClusterSpec cluster;
    cluster.device = device_preset("A100");
    const CommModel model(cluster);
    const LinkModel& net = cluster.device.cross_host;
    const double bandwidth_us = 1e6 * 511.0 / 512.0 / (net.busbw_gbps * 1e3);
    // 512 ranks, 4 on each of 128 hosts: 127 network steps and 384 NVLink steps.
    EXPECT_NEAR(model.time_us("allgather", 1e6, 512, Placement::cross_host, 4),
                net.latency_us + 127 * 9.6 + 384 * 3.4 + bandwidth_us, 1e-6);
    EXPECT_NEAR(model.time_us("reducescatter", 1e6, 512, Placement::cross_host, 4),
                model.time_us("allgather", 1e6, 512, Placement::cross_host, 4), 1e-9);
    // Without the members per host (a point-to-point line), and for all-reduce, the per-call figure.
    EXPECT_NEAR(model.time_us("allgather", 1e6, 512, Placement::cross_host), net.latency_us + bandwidth_us, 1e-6);
    EXPECT_NEAR(model.time_us("allreduce", 1e6, 512, Placement::cross_host, 4),
                net.latency_us + 2 * bandwidth_us, 1e-6);
    // Inside a host the preset's per-call figure holds (at most 8 ranks).
    EXPECT_NEAR(model.time_us("allgather", 1e6, 8, Placement::intra_host, 8),
                cluster.device.intra_host.latency_us + 1e6 * 7.0 / 8.0 / (cluster.device.intra_host.busbw_gbps * 1e3), 1e-6);
}

// A hidden collective is not free: the compute beside it runs overlap_compute_slowdown slower
// (arXiv 2507.03114, 18.9 % on average) for as long as the collective lasts; exposed time is
// already in the step. With one measured rate instead of the device's curve, nothing is added.
TEST(OverlapSlowdown, HiddenCollectivesSlowTheComputeBesideThem) {
    PlanLayout p = hand_layout();
    p.engine.dp = 4;
    p.engine.zero = 3;
    p.engine.prefetch = true;
    p.engine.overlap = true;
    p.engine.global_batch = 4;
    const ClusterSpec cluster = a100_cluster(4);
    const ComputeRate rate = hundred_tflops();
    PlanContext context{cluster, CommModel(cluster), rate, PassCosts{}, false, true, hand_device()};
    const PlanPrediction x = predict_layout(p, context);
    double dp_ms = 0;
    for (const CommLine& line : x.comm)
        if (line.dimension == "dp") dp_ms += line.time_ms;
    const double hidden_ms = dp_ms - x.exposed_dp_ms;
    ASSERT_GT(hidden_ms, 0.0);
    EXPECT_DOUBLE_EQ(x.overlap_slowdown_ms, overlap_compute_slowdown * std::min(hidden_ms, x.compute_ms));
    EXPECT_DOUBLE_EQ(x.step_ms, x.compute_ms + x.bubble_ms + x.optimizer_ms + x.exposed_ms() + x.overlap_slowdown_ms);
    context.device_compute.reset();
    EXPECT_EQ(predict_layout(p, context).overlap_slowdown_ms, 0.0);
}

// Megatron's convention keeps fp32 gradients but gathers bf16 parameters (its distributed
// optimizer, FSDP's param_dtype): the dp all-gather moves 2 B per parameter, the
// reduce-scatter 4; ZeRO's convention moves 2 B both ways. train's counters (fp32) are the base.
TEST(WireBytes, MegatronGathersBf16ParametersAndReducesFp32Gradients) {
    PlanLayout p = hand_layout();
    p.engine.dp = 4;
    p.engine.zero = 3;
    p.engine.global_batch = 4;
    const ClusterSpec cluster = a100_cluster(4);
    const ComputeRate rate = hundred_tflops();
    const PlanContext context{cluster, CommModel(cluster), rate, PassCosts{}, false, true, std::nullopt};
    for (const StateConvention states : {StateConvention::megatron, StateConvention::zero}) {
        p.states = states;
        const PlanPrediction x = predict_layout(p, context);
        const auto& counted = x.traffic_by_pp_rank.at(0).at("dp");
        int lines = 0;
        for (const CommLine& line : x.comm) {
            if (line.dimension != "dp") continue;
            const double fp32 = counted.at(line.collective).bytes;
            const bool gradients = line.collective == "reducescatter";
            EXPECT_DOUBLE_EQ(line.bytes, fp32 * (states == StateConvention::megatron && gradients ? 1.0 : 0.5))
                << states_name(states) << " " << line.collective;
            ++lines;
        }
        EXPECT_EQ(lines, 2);
    }
}

// Megatron-core's default buckets: max(40e6, 1e6 x dp) parameters each.
TEST(MegatronParamGather, BucketsOfFortyMillionOrAMillionPerRank) {
    EXPECT_DOUBLE_EQ(megatron_ddp_buckets(3.82e9, 48), 80.0);  // 48e6 each: 79.6 -> 80
    EXPECT_DOUBLE_EQ(megatron_ddp_buckets(100e6, 8), 3.0);     // 40e6 each
    EXPECT_DOUBLE_EQ(megatron_ddp_buckets(1e6, 8), 1.0);
}

// The first bucket's gather waits; each next one runs behind the previous bucket's share of the
// first forward and no more.
TEST(MegatronParamGather, EachBucketHidesBehindThePreviousBucketsForward) {
    // 40 ms in 4 buckets of 10, a 20 ms forward (5 per bucket): 10 + 3 x 5.
    EXPECT_DOUBLE_EQ(megatron_param_gather_exposed_ms(40, 4, 20), 25.0);
    // A forward of 80 (20 per bucket) hides all but the first bucket.
    EXPECT_DOUBLE_EQ(megatron_param_gather_exposed_ms(40, 4, 80), 10.0);
    // One bucket: nothing before it to hide behind.
    EXPECT_DOUBLE_EQ(megatron_param_gather_exposed_ms(40, 1, 80), 40.0);
}

// Under Megatron's convention ZeRO-1 with --overlap gathers behind the first forward; DeepSpeed's
// (--states zero) gathers after the step, exposed whole. The reduce-scatter is alike in both.
TEST(MegatronParamGather, OnlyMegatronsDistributedOptimizerGathersBehindTheForward) {
    PlanLayout p = hand_layout();
    p.engine.dp = 4;
    p.engine.zero = 1;
    p.engine.overlap = true;
    p.engine.global_batch = 8;
    p.engine.microbatches = 2;
    const ClusterSpec cluster = a100_cluster(4);
    const ComputeRate rate = hundred_tflops();
    const PlanContext context{cluster, CommModel(cluster), rate, PassCosts{}, false, true, hand_device()};
    for (const StateConvention states : {StateConvention::megatron, StateConvention::zero}) {
        p.states = states;
        const PlanPrediction x = predict_layout(p, context);
        double reduce = 0, reduce_calls = 0, gather = 0;
        for (const CommLine& line : x.comm) {
            if (line.dimension != "dp") continue;
            if (line.collective == "allgather") gather += line.time_ms;
            else reduce += line.time_ms, reduce_calls += line.calls;
        }
        ASSERT_GT(gather, 0.0);
        const double forward = 2 * x.stages.front().forward_ms, backward = x.compute_ms - forward;
        const double reduce_exposed = std::max(reduce / reduce_calls, reduce - backward / 2);
        const double parameters = static_cast<double>(model_parameter_layout(p.engine.model, p.engine.seq_len).total_numel());  // tp 1, pp 1: the rank holds all
        const double gather_exposed = states == StateConvention::megatron
                                          ? megatron_param_gather_exposed_ms(gather, megatron_ddp_buckets(parameters, 4),
                                                                             forward / 2)
                                          : gather;
        EXPECT_NEAR(x.exposed_dp_ms, reduce_exposed + gather_exposed, 1e-9) << states_name(states);
        if (states == StateConvention::megatron) {
            EXPECT_LT(gather_exposed, gather);
        }
    }
}

// --tp-comm-shared-sms (Transformer Engine before 2.0: no SM margin): the pipelined and bulk
// pairs' GEMMs keep every SM, and the tp time they hide slows the compute beside it at
// overlap_compute_slowdown, as hidden dp time does.
TEST(TpCommOverlap, SharedSmsTakeNoMarginAndSlowTheComputeTheyHide) {
    PlanLayout p = hand_layout();
    p.states = StateConvention::megatron;
    p.engine.tp = 2;
    p.engine.sp = true;
    p.engine.tp_comm_overlap = true;
    p.engine.global_batch = 2;
    p.engine.microbatches = 2;
    const ClusterSpec cluster = a100_cluster(2);
    DeviceCompute device = hand_device();
    device.sms = 132;
    const PlanContext context{cluster, CommModel(cluster), hundred_tflops(), PassCosts{}, false, true, device};
    const PlanPrediction margin = predict_layout(p, context);
    p.tp_comm_sm_margin = false;
    const PlanPrediction shared = predict_layout(p, context);
    // The step's pairs and collectives, as expose_tp takes them.
    std::vector<TpOverlapGemm> pairs = shared.stages.front().tp_overlap_gemms;
    for (TpOverlapGemm& pair : pairs) pair.count *= 2;  // 2 micro-batches
    double ag_ms = 0, ag_calls = 0, rs_ms = 0, rs_calls = 0;
    for (const CommLine& line : shared.comm) {
        if (line.dimension != "tp") continue;
        if (line.collective == "allgather") ag_ms += line.time_ms, ag_calls += line.calls;
        if (line.collective == "reducescatter") rs_ms += line.time_ms, rs_calls += line.calls;
    }
    const TpOverlapStep step = tp_overlap_step(pairs, ag_ms, ag_calls, rs_ms, rs_calls, 2, {0, 0.01});
    ASSERT_GT(step.hidden_on_sms_ms, 0.0);
    // One rank per pipeline and data-parallel group: only tp time is hidden, and only when shared.
    EXPECT_DOUBLE_EQ(margin.overlap_slowdown_ms, 0.0);
    EXPECT_LT(shared.exposed_tp_ms, margin.exposed_tp_ms);  // no GEMM at 132/116 of its time
    EXPECT_NEAR(shared.overlap_slowdown_ms, overlap_compute_slowdown * step.hidden_on_sms_ms, 1e-9);
    EXPECT_EQ(shared.compute_ms, margin.compute_ms);
}

// Gradients are averaged over dp (op avg): the dp lines take an --op avg sweep's fit, the tp
// lines (sums) the sum's. Without an avg sweep both take the sum's, as before.
TEST(AveragedGradients, DpLinesTakeTheAverageSweepTpLinesTheSum) {
    PlanLayout p = hand_layout();
    p.states = StateConvention::parbench;
    p.engine.precision = Precision::fp32;
    p.engine.dp = 2;
    p.engine.tp = 2;
    p.engine.global_batch = 2;
    const ClusterSpec cluster = a100_cluster(4);
    const ComputeRate rate = hundred_tflops();
    CollectiveFit sum;
    sum.collective = "allreduce";
    sum.alpha_us = 10;
    sum.busbw_gbps = 10;
    sum.ranks = 2;
    sum.source = "sum.json";
    CollectiveFit average = sum;
    average.collective = averaged_collective("allreduce");
    average.busbw_gbps = 5;
    average.source = "avg.json";
    CommModel comm(cluster);
    comm.add_fit(sum);
    const PlanContext sums_only{cluster, comm, rate, PassCosts{}, false, true, std::nullopt};
    comm.add_fit(average);
    const PlanContext context{cluster, comm, rate, PassCosts{}, false, true, std::nullopt};
    const PlanPrediction before = predict_layout(p, sums_only);
    const PlanPrediction x = predict_layout(p, context);
    int dp_lines = 0, tp_lines = 0;
    for (std::size_t i = 0; i < x.comm.size(); ++i) {
        const CommLine& line = x.comm[i];
        if (line.collective != "allreduce") continue;
        const double each = line.bytes / line.calls;
        const bool dp = line.dimension == "dp";
        const double us = dp ? 10 + each / (5 * 1e3) : 10 + each / (10 * 1e3);  // bus factor 1 at 2 ranks
        EXPECT_NEAR(line.time_ms, line.calls * us / 1e3, 1e-9) << line.dimension;
        EXPECT_EQ(line.source.find("--op avg") != std::string::npos, dp) << line.dimension;
        EXPECT_NEAR(before.comm[i].time_ms, line.calls * (10 + each / (10 * 1e3)) / 1e3, 1e-9) << line.dimension;
        (dp ? dp_lines : tp_lines) += 1;
    }
    EXPECT_EQ(dp_lines, 1);
    EXPECT_EQ(tp_lines, 1);
}

}  // namespace
}  // namespace parbench

namespace parbench {
namespace {

// A framework's loss (Megatron-core's unfused vocabulary-parallel cross-entropy) makes one pass
// per op over the logits: 38 B per bf16 logit forward (cast 6, max 4, subtract 8, exp 8, sum 4,
// divide 8) and 14 backward (multiply 8, the cast's backward 6); fp32 logits skip the casts.
// parbench's own fused loss keeps 12 and 8.
TEST(LayerWork, FrameworkLossMovesItsLogitsOncePerOp) {
    LayerWorkShape shape;
    shape.model.kind = ModelKind::gpt;
    shape.model.hidden = 64;
    shape.model.vocab = 1000;
    shape.seq = 10;
    shape.keys = 10;
    const double hidden = 10.0 * 64, logits = 10.0 * 1000;
    auto loss_bytes = [&](bool framework, double e) {
        shape.framework_loss = framework;
        shape.element_bytes = e;
        const LayerWork head = head_work(shape);
        return std::pair{head.forward.memory_bytes - 2.0 * hidden * e,
                         head.input_grad.memory_bytes - 1.5 * 2.0 * hidden * e};
    };
    EXPECT_EQ(loss_bytes(false, 2), std::pair(12.0 * logits, 8.0 * logits));
    EXPECT_EQ(loss_bytes(true, 2), std::pair(38.0 * logits, 14.0 * logits));
    EXPECT_EQ(loss_bytes(true, 4), std::pair(32.0 * logits, 8.0 * logits));
}

}  // namespace
}  // namespace parbench

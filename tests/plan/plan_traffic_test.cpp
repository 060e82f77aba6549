// The formulas `plan` and `train` share: one rank's traffic per step (theory/rank_traffic.hpp)
// against the models and the pipeline schedules it stands for, Llama's per-layer activations
// under the paper's convention against a count by hand, and the compute of ranks that share
// their host's cores.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>

#include "device/cpu_device.hpp"
#include "plan/layout_plan.hpp"
#include "theory/llama_activation_memory.hpp"
#include "theory/pipeline/partition.hpp"
#include "theory/pipeline/schedule.hpp"
#include "theory/rank_traffic.hpp"
#include "train/memory_ledger.hpp"
#include "train/model.hpp"
#include "train/ops/ops.hpp"

namespace parbench {
namespace {

ModelConfig model(const std::string& name) {
    return load_model_config(std::string(PARBENCH_TEST_MODELS) + "/" + name + ".json");
}

// ZeRO-3 gathers along this order, so it must be the one the models acquire their units in.
TEST(PlanTraffic, UseOrderIsTheModelsOwn) {
    for (const std::string name : {"gpt-tiny", "llama-tiny", "mlp-tiny"}) {
        const ModelConfig config = model(name);
        CpuDevice device;
        std::unique_ptr<Ops> ops = make_ops(device);
        MemoryLedger ledger(device);
        MicrobatchShape shape;
        shape.seq_len = config.seq_len;
        const std::unique_ptr<Model> built = make_model(config, shape, 1, *ops, ledger);
        EXPECT_EQ(model_parameter_use_order(config), built->parameter_use_order()) << name;
        EXPECT_EQ(model_parameter_units_held_at_once(config), built->parameter_units_held_at_once()) << name;
    }
}

// GPT's tied embedding is gathered once per micro-batch: the encoder's copy stays held for
// the head and into backward (2L + 1 gathers, as FSDP's root unit), not gathered again.
TEST(PlanTraffic, WholeGptGathersItsTiedEmbeddingOnce) {
    const ModelConfig gpt = model("gpt-tiny");  // 2 layers: units 0 (embedding, head), 1, 2
    EXPECT_EQ(model_parameter_use_order(gpt), (std::vector<int>{0, 1, 2, 2, 1}));
    EXPECT_EQ(model_parameter_units_held_at_once(gpt), 2);
}

// A pipelined part's order visits its own units only, numbered as in its layout.
TEST(PlanTraffic, PipelinedUseOrderIsInTheStagesNumbering) {
    const ModelConfig gpt = model("gpt-tiny");  // 2 layers: units 0 (embedding, head), 1, 2
    PipelinePart last;
    last.chunks = {LayerRange{1, 2}};  // holds units 0 and 2, local 0 and 1
    EXPECT_EQ(model_parameter_use_order(gpt, last), (std::vector<int>{1, 0, 1}));
    PipelinePart first;
    first.chunks = {LayerRange{0, 1}};
    EXPECT_EQ(model_parameter_use_order(gpt, first), (std::vector<int>{0, 1, 1}));
}

Layout pipelined(const ModelConfig& config, ScheduleKind schedule, int pp, int virtual_stages, int microbatches) {
    Layout l;
    l.model = config;
    l.seq_len = config.seq_len;
    l.microbatch_size = 2;
    l.microbatches = microbatches;
    l.pp = pp;
    l.schedule = schedule;
    l.virtual_stages = virtual_stages;
    l.stage_ranges = virtual_stage_layers(config.layers, pp, virtual_stages, {});
    return l;
}

// Every transfer the schedule makes is in the formula, for every rank and schedule: the sends
// and receives of each rank's action list, b·s·h floats each, and GPT's tied-embedding
// exchange on the two end ranks only.
TEST(PlanTraffic, PipelineTransfersAreTheSchedulesOwn) {
    ModelConfig gpt = model("gpt-tiny");
    gpt.layers = 8;
    struct Case {
        ScheduleKind schedule;
        int pp, virtual_stages, microbatches;
    };
    for (const Case c : {Case{ScheduleKind::gpipe, 4, 1, 6}, Case{ScheduleKind::one_f_one_b, 3, 1, 5},
                         Case{ScheduleKind::interleaved, 2, 2, 4}, Case{ScheduleKind::interleaved, 4, 2, 8},
                         Case{ScheduleKind::zero_bubble_h1, 4, 1, 6}}) {
        const Layout l = pipelined(gpt, c.schedule, c.pp, c.virtual_stages, c.microbatches);
        const Schedule schedule = make_schedule(c.schedule, ScheduleShape{c.pp, c.microbatches, c.virtual_stages});
        const double boundary = 2.0 * gpt.seq_len * gpt.hidden * 4.0;
        const std::string what = schedule_kind_name(c.schedule) + " p" + std::to_string(c.pp);
        for (int r = 0; r < c.pp; ++r) {
            double sends = 0, recvs = 0;
            for (const Action& action : schedule.ranks.at(static_cast<std::size_t>(r))) {
                sends += action.is_send() ? 1 : 0;
                recvs += action.is_recv() ? 1 : 0;
            }
            const TrafficByOp pp = engine_rank_traffic(l, r).at("pp");
            EXPECT_EQ(pp.at("send").calls, sends) << what << " rank " << r;
            EXPECT_EQ(pp.at("recv").calls, recvs) << what << " rank " << r;
            EXPECT_EQ(pp.at("send").bytes, sends * boundary) << what << " rank " << r;
            EXPECT_EQ(pp.count("sendrecv"), r == 0 || r == c.pp - 1 ? 1u : 0u) << what << " rank " << r;
        }
    }
    // Llama's embedding and head are separate units: nothing to exchange.
    const Layout llama = pipelined(model("llama-tiny"), ScheduleKind::one_f_one_b, 2, 1, 4);
    EXPECT_EQ(engine_rank_traffic(llama, 0).at("pp").count("sendrecv"), 0u);
    // Under SP a transfer carries the rank's 1/t of the rows.
    Layout sp = pipelined(gpt, ScheduleKind::one_f_one_b, 2, 1, 4);
    sp.tp = 2;
    sp.sp = true;
    const TrafficByOp split = engine_rank_traffic(sp, 0).at("pp");
    EXPECT_EQ(split.at("send").bytes / split.at("send").calls, 2.0 * gpt.seq_len / 2 * gpt.hidden * 4.0);
}

// Llama 3 8B's shape (h 4096, a 32, g 8 so h_kv 1024, f 14336) at s = 4096, b = 1, counted item
// by item as theory/llama_activation_memory.hpp lists them (2 bytes each), sb = 4096:
//   t = 8, TP:   8sbh 134217728 + 4sbh/t 8388608 + 4sb·h_kv/t 2097152 + 6sbf/t 44040192
//                + 2as²b/t 134217728 = 322961408
//   t = 8, SP:   the 8sbh becomes 16777216: 205520896; selective drops 134217728: 71303168;
//                full keeps 2sbh/t = 4194304
//   t = 1:       12sbh 201326592 + 4sb·h_kv 16777216 + 6sbf 352321536 + 2as²b 1073741824
//                = 1644167168
//   t = 16:      g = 8 does not split 16 ways, so k and v stay whole (4sb·h_kv = 16777216):
//                134217728 + 4194304 + 16777216 + 22020096 + 67108864 = 244318208
TEST(PlanLlamaActivations, HandDerivedLlama3_8B) {
    const ModelConfig llama = model("llama3-8b");
    auto bytes = [&](int tp, bool sp, Recompute recompute) {
        return llama_paper_layer_activation_bytes(llama, 4096, 1, tp, sp, recompute).bytes;
    };
    EXPECT_DOUBLE_EQ(bytes(8, false, Recompute::none), 322961408.0);
    EXPECT_DOUBLE_EQ(bytes(8, true, Recompute::none), 205520896.0);
    EXPECT_DOUBLE_EQ(bytes(8, true, Recompute::selective), 71303168.0);
    EXPECT_DOUBLE_EQ(bytes(8, true, Recompute::full), 4194304.0);
    EXPECT_DOUBLE_EQ(bytes(1, false, Recompute::none), 1644167168.0);
    EXPECT_DOUBLE_EQ(bytes(16, false, Recompute::none), 244318208.0);
    // FP8 projections' inputs: 3sbh (two norm outputs, the output projection's input) and sbf
    // (down's input) at 1 byte: 1644167168 - (50331648 + 58720256) at t = 1.
    EXPECT_DOUBLE_EQ(llama_paper_layer_activation_bytes(llama, 4096, 1, 1, false, Recompute::none, true).bytes,
                     1535115264.0);
    EXPECT_DOUBLE_EQ(llama_paper_layer_activation_bytes(llama, 4096, 1, 8, true, Recompute::full, true).bytes,
                     4194304.0);
    EXPECT_NE(llama_paper_layer_activation_bytes(llama, 4096, 1, 8, true, Recompute::none).formula.find("2205.05198"),
              std::string::npos);
}

// --states zero|megatron take Llama's own items, not GPT's table 2 row.
TEST(PlanLlamaActivations, ConventionMemoryUsesLlamasItems) {
    PlanLayout p;
    p.states = StateConvention::megatron;
    Layout& l = p.engine;
    l.model = model("llama3-8b");
    l.seq_len = 4096;
    l.tp = 8;
    l.sp = true;
    const PlanMemory m = plan_memory(p);
    EXPECT_DOUBLE_EQ(m.activation_bytes_per_layer, 205520896.0);
    EXPECT_DOUBLE_EQ(m.activations, 32 * 205520896.0);
    EXPECT_NE(m.activation_formula.find("Llama"), std::string::npos) << m.activation_formula;
}

PlanPrediction predict_on(int gpus, int gpus_per_host, int cores_per_host) {
    PlanLayout p;
    Layout& l = p.engine;
    l.model = model("gpt-tiny");
    l.seq_len = l.model.seq_len;
    l.dp = gpus;
    p.engine.global_batch = gpus;
    ClusterSpec cluster;
    cluster.device = device_preset("H100");
    cluster.gpus = gpus;
    cluster.gpus_per_host = gpus_per_host;
    cluster.cores_per_host = cores_per_host;
    ComputeRate rate;
    rate.tflops_per_gpu = 0.01;
    rate.optimizer_gbps = 5.0;
    const PlanContext context{cluster, CommModel(cluster), rate, PassCosts{}, false, true, std::nullopt};
    return predict_layout(p, context);
}

// 4 ranks on a host of 2 cores compute at half the rate each: compute and optimizer take twice
// as long, and the prediction says it is oversubscribed; with a core each, nothing changes.
TEST(PlanCompute, OversubscribedRanksShareTheirHostsCores) {
    const PlanPrediction own = predict_on(4, 4, 4);
    const PlanPrediction unknown = predict_on(4, 4, 0);
    const PlanPrediction shared = predict_on(4, 4, 2);
    const PlanPrediction two_hosts = predict_on(4, 2, 2);  // 2 ranks per host, 2 cores each
    const PlanPrediction few_ranks = predict_on(4, 8, 2);  // 4 ranks of a host of 8 GPUs
    EXPECT_FALSE(own.compute_share.oversubscribed());
    EXPECT_DOUBLE_EQ(unknown.compute_ms, own.compute_ms);
    EXPECT_TRUE(shared.compute_share.oversubscribed());
    EXPECT_DOUBLE_EQ(shared.compute_share.share, 0.5);
    EXPECT_DOUBLE_EQ(shared.compute_ms, 2.0 * own.compute_ms);
    EXPECT_DOUBLE_EQ(shared.optimizer_ms, 2.0 * own.optimizer_ms);
    EXPECT_DOUBLE_EQ(two_hosts.compute_ms, own.compute_ms);
    EXPECT_EQ(few_ranks.compute_share.ranks_per_host, 4);
    EXPECT_DOUBLE_EQ(few_ranks.compute_ms, shared.compute_ms);
    EXPECT_DOUBLE_EQ(predict_on(3, 3, 2).compute_share.share, 2.0 / 3.0);
}

std::string write_train_report(const std::string& name, const std::string& environment) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << R"({"schema":"parbench.report/v1","command":"train",)" << environment
                        << R"("results":[{"achieved_tflops_per_rank":0.01,"model":{"name":"gpt-small"},)"
                        << R"("layout":{"dp":4,"tp":1,"pp":1}}]})";
    return path;
}

// A train run of 4 ranks on 2 cores achieved half a core's rate per rank: the calibration
// doubles it back to one rank with a core of its own, and keeps the host's cores.
TEST(PlanCompute, OversubscribedCalibrationIsScaledToAWholeCore) {
    const ModelConfig small = model("gpt-small");
    const ComputeRate shared = calibrate_compute(
        write_train_report("shared.json",
                           R"("environment":{"device_kind":"cpu","cpu_cores":2,"ranks_per_host":{"a":4}},)"),
        small);
    EXPECT_DOUBLE_EQ(shared.tflops_per_gpu, 0.02);
    EXPECT_EQ(shared.measured_cores, 2);
    EXPECT_EQ(shared.measured_ranks_per_host, 4);
    EXPECT_NE(shared.source.find("4 ranks on 2 cores"), std::string::npos) << shared.source;
    const ComputeRate own = calibrate_compute(
        write_train_report("own.json", R"("environment":{"device_kind":"cpu","cpu_cores":8,"ranks_per_host":{"a":4}},)"),
        small);
    EXPECT_DOUBLE_EQ(own.tflops_per_gpu, 0.01);
    const ComputeRate gpu = calibrate_compute(
        write_train_report("gpu.json", R"("environment":{"device_kind":"cuda","cpu_cores":2,"ranks_per_host":{"a":4}},)"),
        small);
    EXPECT_DOUBLE_EQ(gpu.tflops_per_gpu, 0.01);
    EXPECT_EQ(gpu.measured_cores, 0);
}

}  // namespace
}  // namespace parbench

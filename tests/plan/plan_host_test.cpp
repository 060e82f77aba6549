// plan on a CPU host (plan/host_overlap.hpp, plan/host_contention.hpp): ranks that take every core
// hide no communication, a GPU still overlaps; ranks computing at once run at the busy-core level
// the calibration measured, a pipeline only while its stages compute together; the busy
// calibration's runs are read and checked (one rank each, the same run, at once, one host).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "plan/compute_calibration.hpp"
#include "plan/host_contention.hpp"
#include "plan/host_overlap.hpp"
#include "plan/layout_plan.hpp"
#include "theory/model_config.hpp"
#include "theory/pipeline/partition.hpp"

namespace parbench {
namespace {

// The validation's model (scripts/plan/validate_plan.sh).
ModelConfig small_gpt() { return load_model_config(std::string(PARBENCH_TEST_MODELS) + "/gpt-small.json"); }

PlanLayout cpu_layout() {
    PlanLayout p;
    p.states = StateConvention::parbench;
    Layout& l = p.engine;
    l.model = small_gpt();
    l.seq_len = 128;
    l.precision = Precision::fp32;
    l.global_batch = 8;
    l.microbatch_size = 4;
    return p;
}

// The validation's host: `cores` CPU cores, `ranks` of them per host.
ClusterSpec cpu_cluster(int gpus, int ranks_per_host, int cores) {
    ClusterSpec cluster;
    cluster.device.name = "a CPU host's cores";
    cluster.device.peak_tflops_bf16 = cluster.device.peak_tflops_fp32 = 0.2;
    cluster.device.memory_gib = 4;
    cluster.device.memory_bandwidth_gbps = 10;
    cluster.device.intra_host = LinkModel{5, 5};
    cluster.device.cross_host = LinkModel{50, 1};
    cluster.gpus = gpus;
    cluster.gpus_per_host = ranks_per_host;
    cluster.cores_per_host = cores;
    return cluster;
}

DeviceCompute cpu_device() {
    DeviceCompute d;
    d.peak_tflops = 0.2;
    d.gemm = {0.6, 20.0, "hand"};
    d.memory_gbps = 10;
    d.memory_fraction = 0.8;
    return d;
}

PlanContext context_for(const ClusterSpec& cluster, HostContention contention = {}) {
    ComputeRate rate;
    rate.tflops_per_gpu = 0.1;
    PlanContext context{cluster, CommModel(cluster), rate, PassCosts{}, false, true, cpu_device()};
    context.contention = contention;
    return context;
}

double dimension_ms(const PlanPrediction& x, const std::string& dimension) {
    double ms = 0;
    for (const CommLine& line : x.comm)
        if (line.dimension == dimension) ms += line.time_ms;
    return ms;
}

PlanLayout zero3_prefetch() {
    PlanLayout p = cpu_layout();
    p.engine.dp = 2;
    p.engine.zero = 3;
    p.engine.prefetch = p.engine.overlap = true;
    return p;
}

TEST(HostOverlap, RanksTakingEveryCpuCoreHideNothing) {
    const PlanPrediction x = predict_layout(zero3_prefetch(), context_for(cpu_cluster(2, 2, 2)));
    ASSERT_GT(dimension_ms(x, "dp"), 0.0);
    EXPECT_TRUE(x.host_overlap.hides_nothing);
    EXPECT_DOUBLE_EQ(x.exposed_dp_ms, dimension_ms(x, "dp"));
    EXPECT_EQ(x.overlap_slowdown_ms, 0.0);  // nothing hidden took anything from the compute
    // Oversubscribed (4 ranks on 2 cores): the same.
    PlanLayout four = zero3_prefetch();
    four.engine.dp = 4;
    const PlanPrediction y = predict_layout(four, context_for(cpu_cluster(4, 4, 2)));
    EXPECT_DOUBLE_EQ(y.exposed_dp_ms, dimension_ms(y, "dp"));
}

// What parbench's engine issues non-blocking (train/schemes/data_parallel.cpp, zero.cpp).
TEST(HostOverlap, NonblockingCallsAreTheEnginesRequests) {
    Layout l;
    EXPECT_EQ(nonblocking_calls(l, "allreduce", 3), 0.0);  // ddp without --overlap: blocking
    l.overlap = true;
    EXPECT_EQ(nonblocking_calls(l, "allreduce", 3), 3.0);  // every bucket's MPI_Iallreduce
    l.zero = 2;
    EXPECT_EQ(nonblocking_calls(l, "allreduce", 3), 0.0);
    EXPECT_EQ(nonblocking_calls(l, "reducescatter", 24), 24.0);
    EXPECT_EQ(nonblocking_calls(l, "allgather", 2), 0.0);  // ZeRO-2's parameter gather after the step
    l.zero = 3;
    l.microbatches = 2;
    EXPECT_EQ(nonblocking_calls(l, "allgather", 48), 0.0);  // no --prefetch: gathered as used
    l.prefetch = true;
    EXPECT_EQ(nonblocking_calls(l, "allgather", 48), 46.0);  // each micro-batch's first gather blocks
    l.overlap = false;
    EXPECT_EQ(nonblocking_calls(l, "reducescatter", 24), 0.0);
}

// Where the ranks take every core, the engine's requests cost their --nonblocking sweep's time
// (dp's averaged all-reduce and reduce-scatter, ZeRO-3's prefetched gathers); without that sweep,
// or with a core to spare, the blocking call's.
TEST(HostOverlap, RequestsPricedFromTheNonblockingSweepWhereNothingHides) {
    const auto fit = [](const std::string& collective, double busbw) {
        CollectiveFit f;
        f.collective = collective;
        f.alpha_us = 10;
        f.busbw_gbps = busbw;
        f.ranks = 2;
        f.source = collective + ".json";
        return f;
    };
    const auto predict = [&](const PlanLayout& p, int cores, bool with_requests) {
        const ClusterSpec cluster = cpu_cluster(2, 2, cores);
        PlanContext context = context_for(cluster);
        for (const std::string op : {"allreduce", "reducescatter", "allgather"}) {
            const std::string blocking = op == "allgather" ? op : averaged_collective(op);
            context.comm.add_fit(fit(blocking, 5));
            if (with_requests) context.comm.add_fit(fit(nonblocking_collective(blocking), 2));
        }
        return predict_layout(p, context);
    };
    const auto line = [](const PlanPrediction& x, const std::string& collective) {
        for (const CommLine& l : x.comm)
            if (l.dimension == "dp" && l.collective == collective) return l;
        ADD_FAILURE() << "no dp " << collective << " line";
        return CommLine{};
    };
    const auto priced_ms = [](const CommLine& l, double requests) {
        const double each = l.bytes / l.calls * bus_factor(l.collective, 2);  // 1 for all-reduce, else 1/2
        return ((l.calls - requests) * (10 + each / 5e3) + requests * (10 + each / 2e3)) / 1e3;
    };
    PlanLayout ddp = cpu_layout();
    ddp.engine.dp = 2;
    PlanLayout overlapped = ddp;
    overlapped.engine.overlap = true;
    const CommLine blocking = line(predict(ddp, 2, true), "allreduce");
    const CommLine requests = line(predict(overlapped, 2, true), "allreduce");
    EXPECT_NEAR(blocking.time_ms, priced_ms(blocking, 0), 1e-9);
    EXPECT_NEAR(requests.time_ms, priced_ms(requests, requests.calls), 1e-9);
    EXPECT_NE(requests.source.find("--nonblocking"), std::string::npos) << requests.source;
    EXPECT_EQ(blocking.source.find("--nonblocking"), std::string::npos) << blocking.source;
    // No --nonblocking sweep, or a spare core (the schemes' overlap holds): the blocking call's time.
    EXPECT_DOUBLE_EQ(line(predict(overlapped, 2, false), "allreduce").time_ms, blocking.time_ms);
    EXPECT_DOUBLE_EQ(line(predict(overlapped, 4, true), "allreduce").time_ms, blocking.time_ms);
    // ZeRO-3 with --prefetch --overlap: every reduce-scatter, and the gathers but one per micro-batch.
    const PlanPrediction zero3 = predict(zero3_prefetch(), 2, true);
    const CommLine scatters = line(zero3, "reducescatter"), gathers = line(zero3, "allgather");
    EXPECT_NEAR(scatters.time_ms, priced_ms(scatters, scatters.calls), 1e-9);
    ASSERT_GT(gathers.calls, zero3_prefetch().engine.microbatches);
    EXPECT_NEAR(gathers.time_ms, priced_ms(gathers, gathers.calls - zero3_prefetch().engine.microbatches), 1e-9);
    EXPECT_DOUBLE_EQ(zero3.exposed_dp_ms, dimension_ms(zero3, "dp"));
}

TEST(HostOverlap, ASpareCoreOrAGpuStillOverlaps) {
    // 2 ranks on 4 cores: a core free to progress the transfers, the schemes' overlap holds.
    const PlanPrediction spare = predict_layout(zero3_prefetch(), context_for(cpu_cluster(2, 2, 4)));
    EXPECT_FALSE(spare.host_overlap.hides_nothing);
    EXPECT_LT(spare.exposed_dp_ms, dimension_ms(spare, "dp"));
    // A GPU preset with its host's cores named: NCCL progresses on the GPU.
    ClusterSpec gpu = cpu_cluster(2, 2, 2);
    gpu.device = device_preset("A100");
    EXPECT_FALSE(is_cpu_host(gpu));
    const PlanPrediction on_gpu = predict_layout(zero3_prefetch(), context_for(gpu));
    EXPECT_FALSE(on_gpu.host_overlap.hides_nothing);
    EXPECT_LT(on_gpu.exposed_dp_ms, dimension_ms(on_gpu, "dp"));
    // A --cluster device computing on a GPU preset's curve is a GPU too.
    ClusterSpec named = cpu_cluster(2, 2, 2);
    named.device.gemm_preset = "A100";
    EXPECT_FALSE(is_cpu_host(named));
}

TEST(HostContention, LevelBetweenAloneAndEveryCoreBusy) {
    const HostContention c{4, 1.3, "hand"};
    EXPECT_DOUBLE_EQ(c.at(1), 1.0);
    EXPECT_DOUBLE_EQ(c.at(4), 1.3);
    EXPECT_DOUBLE_EQ(c.at(8), 1.3);  // nothing measured beyond four
    EXPECT_NEAR(c.at(2.5), 1.15, 1e-12);
    EXPECT_DOUBLE_EQ(HostContention{}.at(4), 1.0);  // not calibrated
}

TEST(HostContention, RanksInStepComputeAtTheBusyLevel) {
    PlanLayout p = cpu_layout();
    p.engine.dp = 2;
    const PlanPrediction alone = predict_layout(p, context_for(cpu_cluster(2, 2, 2)));
    EXPECT_TRUE(alone.contention_by_pp_rank.empty());
    const PlanPrediction busy = predict_layout(p, context_for(cpu_cluster(2, 2, 2), {2, 1.07, "hand"}));
    ASSERT_EQ(busy.contention_by_pp_rank, std::vector<double>{1.07});
    EXPECT_NEAR(busy.compute_ms, 1.07 * alone.compute_ms, 1e-9);
    // One rank per host: the other core idles, the alone level.
    const PlanPrediction spread = predict_layout(p, context_for(cpu_cluster(2, 1, 2), {2, 1.07, "hand"}));
    EXPECT_NEAR(spread.compute_ms, alone.compute_ms, 1e-9);
    // A GPU cluster takes no CPU host's contention.
    ClusterSpec gpu = cpu_cluster(2, 2, 0);
    const PlanPrediction no_cores = predict_layout(p, context_for(gpu, {2, 1.07, "hand"}));
    EXPECT_TRUE(no_cores.contention_by_pp_rank.empty());
}

TEST(HostContention, APipelineIsContendedOnlyWhileItsStagesComputeTogether) {
    PlanLayout p = cpu_layout();
    Layout& l = p.engine;
    l.pp = 2;
    l.microbatches = 4;
    l.microbatch_size = 2;
    l.stage_ranges = virtual_stage_layers(4, 2, 1, {});
    const PlanPrediction alone = predict_layout(p, context_for(cpu_cluster(2, 2, 2)));
    const PlanPrediction busy = predict_layout(p, context_for(cpu_cluster(2, 2, 2), {2, 1.2, "hand"}));
    ASSERT_EQ(busy.contention_by_pp_rank.size(), 2u);
    for (const double slowdown : busy.contention_by_pp_rank) {
        EXPECT_GT(slowdown, 1.0);
        EXPECT_LT(slowdown, 1.2);  // the warm-up and cool-down compute alone
    }
    EXPECT_GT(busy.compute_ms, alone.compute_ms);
    EXPECT_LT(busy.compute_ms, 1.2 * alone.compute_ms);
    // Two hosts of one rank each: every stage computes alone on its host.
    const PlanPrediction spread = predict_layout(p, context_for(cpu_cluster(2, 1, 2), {2, 1.2, "hand"}));
    EXPECT_EQ(spread.contention_by_pp_rank, (std::vector<double>{1.0, 1.0}));
    // dp 2 x pp 2 on one host of 2 cores: both cores busy whenever a stage computes.
    l.dp = 2;
    l.global_batch = 16;
    const PlanPrediction four = predict_layout(p, context_for(cpu_cluster(4, 4, 2), {2, 1.2, "hand"}));
    EXPECT_EQ(four.contention_by_pp_rank.size(), 2u);
    for (const double slowdown : four.contention_by_pp_rank) EXPECT_NEAR(slowdown, 1.2, 1e-12);
}

// A train report of a one-rank run on a 2-core CPU host, as `parbench train --json` writes it.
std::string write_run(const std::string& name, double step_ms, const std::string& started, const std::string& finished,
                      int batch = 4, int ranks = 1, const std::string& host = "vm") {
    const std::string path = testing::TempDir() + "/plan_host_" + name + ".json";
    std::ofstream(path) << R"({"schema": "parbench.report/v1", "command": "train", "started_at": ")" << started
                        << R"(", "finished_at": ")" << finished << R"(",
      "environment": {"device_kind": "cpu", "cpu_cores": 2, "hosts": [")" << host << R"("], "ranks_per_host": {")" << host
                        << R"(": )" << ranks << R"(}},
      "results": [{"achieved_tflops_per_rank": 0.1, "model": {"name": "gpt-small"}, "global_batch": )" << batch << R"(,
                   "layout": {"dp": )" << ranks << R"(, "tp": 1, "pp": 1, "cp": 1, "microbatches": 1, "recompute": "none"},
                   "step_time_ms": {"median": )" << step_ms << "}}]}";
    return path;
}

TEST(HostContention, BusySlowdownIsTheLevelsRatioAndNeverASpeedUp) {
    EXPECT_DOUBLE_EQ(busy_slowdown(1.2, 1.0), 1.2);
    EXPECT_DOUBLE_EQ(busy_slowdown(0.5, 0.4), 1.25);
    EXPECT_DOUBLE_EQ(busy_slowdown(0.97, 1.0), 1.0);  // busy runs measured faster than alone: noise
}

TEST(BusyCalibration, OneRankRunsAtOnceGiveTheirMedianStep) {
    const ModelConfig model = small_gpt();
    const ComputeRate alone = calibrate_compute(write_run("alone", 97, "2026-12-05T02:00:00Z", "2026-12-05T02:00:01Z"), model);
    const std::string a = write_run("a", 103, "2026-12-05T02:01:00Z", "2026-12-05T02:01:02Z");
    const std::string b = write_run("b", 105, "2026-12-05T02:01:01Z", "2026-12-05T02:01:03Z");
    const BusyCompute busy = calibrate_busy_compute({a, b}, model, alone);
    EXPECT_EQ(busy.ranks, 2);
    EXPECT_DOUBLE_EQ(busy.run.step_ms, 104.0);
    EXPECT_EQ(busy.run.global_batch, 4);
    EXPECT_NE(busy.source.find("--calibrate-compute-busy"), std::string::npos);
}

TEST(BusyCalibration, RefusesRunsNotAtOnceOrNotTheSameRun) {
    const ModelConfig model = small_gpt();
    const ComputeRate alone = calibrate_compute(write_run("alone2", 97, "2026-12-05T02:00:00Z", "2026-12-05T02:00:01Z"), model);
    const std::string a = write_run("a2", 103, "2026-12-05T02:01:00Z", "2026-12-05T02:01:02Z");
    const auto refused = [&](const std::vector<std::string>& paths, const std::string& words) {
        try {
            calibrate_busy_compute(paths, model, alone);
            ADD_FAILURE() << "accepted; expected a refusal saying " << words;
        } catch (const UsageError& error) {
            const std::string message = error.what();
            EXPECT_NE(message.find("--calibrate-compute-busy"), std::string::npos) << message;
            EXPECT_NE(message.find(words), std::string::npos) << message;
        }
    };
    refused({a}, "two or more");
    refused({a, write_run("later", 104, "2026-12-05T02:01:05Z", "2026-12-05T02:01:06Z")}, "did not overlap");
    refused({a, write_run("batch8", 104, "2026-12-05T02:01:00Z", "2026-12-05T02:01:02Z", 8)}, "batch 8");
    refused({a, write_run("two", 104, "2026-12-05T02:01:00Z", "2026-12-05T02:01:02Z", 4, 2)}, "one-rank");
    refused({a, write_run("elsewhere", 104, "2026-12-05T02:01:00Z", "2026-12-05T02:01:02Z", 4, 1, "other")},
            "host");
    refused({a, a, a}, "2 cores");
}

}  // namespace
}  // namespace parbench

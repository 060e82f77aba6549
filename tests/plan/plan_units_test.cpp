// parbench plan's formulas against the papers' own tables, and its calibration, without MPI.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "plan/alpha_beta.hpp"
#include "plan/layout_plan.hpp"
#include "theory/activation_memory.hpp"
#include "theory/memory.hpp"
#include "train/model.hpp"

namespace parbench {
namespace {

constexpr double GB = 1e9;  // the papers' GB

ModelConfig model(const std::string& name) {
    return load_model_config(std::string(PARBENCH_TEST_MODELS) + "/" + name + ".json");
}

// ZeRO (Rajbhandari et al., arXiv 1910.02054) table 1: per-device model-state memory in GB
// for mixed-precision Adam (K = 12) at data-parallel degree Nd, stages Pos, Pos+g, Pos+g+p.
struct ZeroRow {
    double psi;
    int nd;
    double os, os_g, os_g_p;
};
constexpr ZeroRow zero_table1[] = {
    {7.5e9, 1, 120, 120, 120},      {7.5e9, 4, 52.5, 41.3, 30},     {7.5e9, 16, 35.6, 21.6, 7.5},
    {7.5e9, 64, 31.4, 16.6, 1.88},  {7.5e9, 256, 30.4, 15.4, 0.47}, {7.5e9, 1024, 30.1, 15.1, 0.12},
    {128e9, 1, 2048, 2048, 2048},   {128e9, 4, 896, 704, 512},      {128e9, 16, 608, 368, 128},
    {128e9, 64, 536, 284, 32},      {128e9, 256, 518, 263, 8},      {128e9, 1024, 513, 257, 2},
    {1e12, 1, 16000, 16000, 16000}, {1e12, 4, 7000, 5500, 4000},    {1e12, 16, 4750, 2875, 1000},
    {1e12, 64, 4187, 2218, 250},    {1e12, 256, 4046, 2054, 62.5},  {1e12, 1024, 4011, 2013, 15.6},
};

// The table rounds to 3 significant digits (and 2213 -> 2218-style truncation): 0.6%.
void expect_gb(double bytes, double table_gb, const std::string& what) {
    EXPECT_NEAR(bytes / GB, table_gb, 0.006 * table_gb + 0.005) << what;
}

TEST(PlanPaperTables, ZeroTable1ModelStates) {
    for (const ZeroRow& row : zero_table1) {
        const std::string what = "psi " + std::to_string(row.psi) + " Nd " + std::to_string(row.nd);
        expect_gb(model_state_bytes(StateConvention::zero, row.psi, 1, row.nd).total(), row.os, what + " Pos");
        expect_gb(model_state_bytes(StateConvention::zero, row.psi, 2, row.nd).total(), row.os_g, what + " Pos+g");
        expect_gb(model_state_bytes(StateConvention::zero, row.psi, 3, row.nd).total(), row.os_g_p, what + " Pos+g+p");
    }
}

// Each byte convention's rules are found by its name and carry it back (plan/state_rules.hpp);
// Megatron's rule names its distributed optimizer only under ZeRO >= 1.
TEST(PlanStates, EachConventionsRulesAreFoundByItsName) {
    for (const StateConvention states : {StateConvention::zero, StateConvention::megatron, StateConvention::parbench}) {
        EXPECT_EQ(parse_states(states_name(states)), states) << states_name(states);
        EXPECT_EQ(state_rules(states).convention, states) << states_name(states);
    }
    EXPECT_THROW(parse_states("fsdp"), UsageError);
    EXPECT_FALSE(state_rules(StateConvention::parbench).per_parameter.has_value());
    EXPECT_EQ(model_state_bytes(StateConvention::megatron, 1e9, 0, 8).rule.find("distributed"), std::string::npos);
    EXPECT_NE(model_state_bytes(StateConvention::megatron, 1e9, 1, 8).rule.find("distributed optimizer"),
              std::string::npos);
}

// ZeRO figure 1: Psi = 7.5B, Nd = 64, K = 12: baseline 120 GB, Pos 31.4, Pos+g 16.6, Pos+g+p 1.9.
TEST(PlanPaperTables, ZeroFigure1) {
    expect_gb(model_state_bytes(StateConvention::zero, 7.5e9, 0, 64).total(), 120, "baseline");
    expect_gb(model_state_bytes(StateConvention::zero, 7.5e9, 1, 64).total(), 31.4, "Pos");
    expect_gb(model_state_bytes(StateConvention::zero, 7.5e9, 2, 64).total(), 16.6, "Pos+g");
    EXPECT_NEAR(model_state_bytes(StateConvention::zero, 7.5e9, 3, 64).total() / GB, 1.9, 0.03);
}

// Narayanan et al. (arXiv 2104.04473) table 1: parameter counts (billions, as printed) of
// the GPT family it trains, vocabulary 51200 and sequence 2048. parbench's GPT has the
// paper's tensors plus the final LayerNorm and the biases the paper's 13/(12h) term counts.
TEST(PlanPaperTables, MegatronTable1ParameterCounts) {
    struct Row {
        const char* name;
        double billions;
    };
    for (const Row row : {Row{"megatron-1.7b", 1.7}, Row{"megatron-3.6b", 3.6}, Row{"megatron-7.5b", 7.5},
                          Row{"megatron-18.4b", 18.4}, Row{"megatron-39.1b", 39.1}, Row{"megatron-76.1b", 76.1},
                          Row{"megatron-145.6b", 145.6}, Row{"megatron-310.1b", 310.1},
                          Row{"megatron-529.6b", 529.6}, Row{"megatron-1008b", 1008.0}}) {
        const ModelConfig config = model(row.name);
        const double counted = static_cast<double>(model_parameter_layout(config, config.seq_len).total_numel());
        // The paper's eq. (sec. 5.1): P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)).
        const double l = config.layers, h = config.hidden, V = config.vocab, s = config.seq_len;
        const double paper = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
        EXPECT_NEAR(counted, paper, 2 * h + 1) << row.name << ": only the final LayerNorm differs";
        const double precision = row.billions >= 1000 ? 0.05 : 0.05;  // printed to 0.1B
        EXPECT_NEAR(counted / 1e9, row.billions, precision + 1e-9) << row.name;
    }
}

// Megatron-LM's theoretical weight-and-optimizer memory (megatron/training/
// theoretical_memory_usage.py): 18 B/param, or 6 + 12/d with the distributed optimizer, on
// the most loaded shard = (transformer parameters / pp + embedding) / tp, with transformer
// parameters 2 l h^2 (6 + 2/h) + 2h (no biases) and embedding V h. parbench counts the real
// tensors (biases and LayerNorms too, held whole by every tp rank), so it is within a few
// tenths of a percent of Megatron's figure.
TEST(PlanPaperTables, MegatronWeightAndOptimizerBytes) {
    const ModelConfig gpt3 = model("gpt3-175b");
    struct Case {
        int tp, pp, dp, zero;
    };
    for (const Case c : {Case{8, 8, 1, 0}, Case{8, 8, 16, 1}, Case{8, 16, 8, 1}, Case{4, 8, 32, 0}}) {
        const double l = gpt3.layers, h = gpt3.hidden, V = gpt3.vocab;
        const double transformer = 2 * l * h * h * (6 + 2 / h) + 2 * h;
        // + the learned position embedding, which Megatron (as parbench) holds whole on every tp
        // rank of the first stage but its estimate leaves out: s h, 0.9-1.8% of these shards.
        const double shard = (transformer / c.pp + V * h) / c.tp + gpt3.seq_len * h;
        const double bytes_per_param = c.zero >= 1 ? 6.0 + 12.0 / c.dp : 18.0;
        const double megatron = shard * bytes_per_param;

        PlanLayout p;
        p.states = StateConvention::megatron;
        Layout& e = p.engine;
        e.model = gpt3;
        e.seq_len = gpt3.seq_len;
        e.tp = c.tp;
        e.pp = c.pp;
        e.dp = c.dp;
        e.zero = c.zero;
        e.microbatches = c.pp;
        e.stage_ranges = std::vector<LayerRange>{};
        for (int s = 0; s < c.pp; ++s) e.stage_ranges.push_back({s * gpt3.layers / c.pp, (s + 1) * gpt3.layers / c.pp});
        const PlanMemory m = plan_memory(p);
        EXPECT_NEAR((m.params + m.grads + m.optimizer) / megatron, 1.0, 0.005)
            << "tp " << c.tp << " pp " << c.pp << " dp " << c.dp << " zero " << c.zero;
    }
}

// Korthikanti et al. (arXiv 2205.05198) table 2, per layer, for their GPT-3 175B (table 3:
// s 2048, h 12288, a 96, t 8, micro-batch 1), so sbh = 25,165,824 and 5as/(ht) = 10:
TEST(PlanPaperTables, SequenceParallelTable2ActivationsPerLayer) {
    const double sbh = 2048.0 * 12288.0;
    LayerActivationShape shape{2048, 1, 12288, 96, 1, false};
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(shape, Recompute::none), sbh * (34 + 80));  // 5as/h = 80
    shape.tp = 8;
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(shape, Recompute::none), sbh * 23);    // 10 + 24/8 + 10
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(shape, Recompute::selective), sbh * 13);  // 10 + 24/8
    shape.sp = true;
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(shape, Recompute::none), sbh * 14.25);  // 34/8 + 10
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(shape, Recompute::selective), sbh * 4.25);  // 34/8
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(shape, Recompute::full), sbh * 2);
    // Sec. 5's claim: sequence parallelism with selective recompute stores ~5x less than tp alone.
    EXPECT_NEAR(23.0 / 4.25, 5.4, 0.05);
}

// FP8 linear layers keep the four linear inputs (2 + 2 of the replicated 10, 2 + 8 of the 24) at
// 1 byte: 34 -> 27, 10 + 24/t -> 8 + 19/t; the layer input under full recompute stays 16-bit.
TEST(PlanPaperTables, Fp8LinearInputsHalveTheLinearLayersSavedInputs) {
    const double sbh = 2048.0 * 12288.0;
    LayerActivationShape shape{2048, 1, 12288, 96, 1, false, 1, true};
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(shape, Recompute::none), sbh * (27 + 80));
    shape.tp = 8;
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(shape, Recompute::none), sbh * (8 + 19.0 / 8 + 10));
    shape.sp = true;
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(shape, Recompute::selective), sbh * 27 / 8);
    EXPECT_DOUBLE_EQ(paper_layer_activation_bytes(shape, Recompute::full), sbh * 2);
    EXPECT_NE(paper_layer_activation_formula(true, true, Recompute::selective, 1, true).find("sbh(27/t), "),
              std::string::npos);
}

// ZeRO-2's default bucket keeps its slots small against the model, so it holds less
// gradient memory than DDP (issue #10: 31.9 MiB against DDP's 14.2 at the old 25 MiB).
TEST(PlanMemory, ZeroTwoDefaultBucketSavesGradientMemory) {
    const ModelConfig small = model("gpt-small");
    const std::size_t parameters = model_parameter_layout(small, small.seq_len).total_numel();
    EXPECT_EQ(default_bucket_bytes(0, parameters), 25u << 20);
    EXPECT_EQ(default_bucket_bytes(2, parameters), parameters);  // 1/4 of 4 B per parameter
    EXPECT_EQ(default_bucket_bytes(2, 1u << 30), 25u << 20);
    Layout l;
    l.model = small;
    l.seq_len = small.seq_len;
    l.dp = 2;
    l.microbatch_size = 4;
    const double ddp = engine_peak_memory(l).of(MemoryCategory::grads);
    l.zero = 2;
    l.bucket_bytes = default_bucket_bytes(2, parameters);
    EXPECT_LT(engine_peak_memory(l).of(MemoryCategory::grads), ddp);
    l.bucket_bytes = 25u << 20;
    EXPECT_GT(engine_peak_memory(l).of(MemoryCategory::grads), ddp);  // the old default's regression
}

std::string write_report(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    return path;
}

// A sweep whose times follow t = 5 us + S x 2(n-1)/n / 2 GB/s exactly, in today's layout and in
// one with per-rank data and out-of-place / in-place halves (the other helper's shape).
TEST(PlanCalibration, FitsAlphaAndBusBandwidth) {
    std::string flat = R"({"schema":"parbench.report/v1","command":"allreduce","environment":{"world_size":2,"hosts":["a"]},"results":[)";
    std::string halves = flat;
    bool first = true;
    for (double bytes : {8.0, 1024.0, 65536.0, 1048576.0, 16777216.0}) {
        const double us = 5.0 + bytes * 1.0 / 2e3;  // bus factor 1 at n = 2, 2 GB/s = 2e3 bytes/us
        const std::string sep = first ? "" : ",";
        first = false;
        flat += sep + R"({"collective":"allreduce","bytes":)" + std::to_string(bytes) + R"(,"wrong":0,"time_us":{"median":)" +
                std::to_string(us) + "}}";
        halves += sep + R"({"collective":"allreduce","bytes":)" + std::to_string(bytes) +
                  R"(,"per_rank":[{"rank":0,"median_us":1}],"out_of_place":{"time_us":{"median":)" + std::to_string(us) +
                  R"(},"wrong":0},"in_place":{"time_us":{"median":1e9}}})";
    }
    flat += "]}";
    halves += "]}";
    for (const std::string& text : {flat, halves}) {
        const auto fits = fit_collective_reports({write_report("sweep.json", text)});
        ASSERT_EQ(fits.size(), 1u);
        EXPECT_NEAR(fits[0].alpha_us, 5.0, 0.01);
        EXPECT_NEAR(fits[0].busbw_gbps, 2.0, 0.01);
        EXPECT_EQ(fits[0].placement, Placement::intra_host);
        ClusterSpec cluster;
        cluster.device = device_preset("H100");
        CommModel model(cluster);
        model.add_fit(fits[0]);
        // At 4 ranks the bus factor is 1.5: 5 + 1.5 x 1 MB / 2 GB/s = 755 us.
        EXPECT_NEAR(model.time_us("allreduce", 1e6, 4, Placement::intra_host), 755.0, 0.5);
        EXPECT_EQ(model.time_us("allreduce", 1e6, 1, Placement::intra_host), 0.0);
    }
}

// Rows a sweep skipped carry their reason as a string (found on a 4-rank `all` report):
// they are left out, not misread. The sweep writes them with 0 bytes (and the size asked for
// beside it), which the range check on bytes refused before the skip was seen
// (scripts/plan/validate_plan.sh's 4-rank calibration stopped on it).
TEST(PlanCalibration, IgnoresSkippedRows) {
    std::string text = R"({"schema":"parbench.report/v1","command":"all","environment":{"world_size":4},"results":[
        {"collective":"allgather","bytes":8,"skipped":"smaller than one float32 per rank"},
        {"collective":"allgather","bytes":0,"count":0,"requested_bytes":8,"skipped":"smaller than one float32 per rank"})";
    for (double bytes : {1024.0, 65536.0, 1048576.0})
        text += R"(,{"collective":"allgather","bytes":)" + std::to_string(bytes) + R"(,"wrong":0,"time_us":{"median":)" +
                std::to_string(3.0 + bytes * 0.75 / 1e3) + "}}";
    text += "]}";
    const auto fits = fit_collective_reports({write_report("skipped.json", text)});
    ASSERT_EQ(fits.size(), 1u);
    EXPECT_EQ(fits[0].sizes, 3);
    EXPECT_NEAR(fits[0].busbw_gbps, 1.0, 0.01);
}

// A sweep of n = 2 ranks (bus factor 1) as a report, one row per (bytes, us); `op` on each row when given.
std::string sweep_text(const std::string& collective, const std::vector<std::pair<double, double>>& rows,
                       const std::string& op = "") {
    std::string text = R"({"schema":"parbench.report/v1","command":")" + collective +
                       R"(","environment":{"world_size":2,"hosts":["a"]},"results":[)";
    for (std::size_t i = 0; i < rows.size(); ++i)
        text += (i ? "," : "") + std::string(R"({"collective":")") + collective + R"(",)" +
                (op.empty() ? "" : R"("op":")" + op + R"(",)") + R"("bytes":)" + std::to_string(rows[i].first) +
                R"(,"wrong":0,"time_us":{"median":)" + std::to_string(rows[i].second) + "}}";
    return text + "]}";
}

// Open MPI's reduce-scatter on 2 shared-memory ranks here: a line up to 2 MiB, then its
// temporaries faulted in on every call (2026-12-02: 8 MiB in 4.7 ms, 32 MiB in 24 ms). Between
// two swept sizes a call takes the measured medians' time; beyond the sweep, the line.
TEST(PlanCalibration, InsideTheSweepTheMeasuredTimesNotTheLine) {
    const std::vector<std::pair<double, double>> rows{
        {8, 5}, {1024, 5.5}, {65536, 37.8}, {2097152, 1053.6}, {8388608, 4700}, {33554432, 24000}};
    const auto fits = fit_collective_reports({write_report("cliff.json", sweep_text("reducescatter", rows))});
    ASSERT_EQ(fits.size(), 1u);
    ASSERT_EQ(fits[0].measured.size(), rows.size());
    ClusterSpec cluster;
    cluster.device = device_preset("H100");
    CommModel model(cluster);
    model.add_fit(fits[0]);
    // The swept sizes as measured, between them linear (gpt-small's 14.9 MB of gradients here).
    for (const auto& [bytes, us] : rows) EXPECT_NEAR(model.time_us("reducescatter", bytes, 2, Placement::intra_host), us, 1e-6);
    const double t = (14866432.0 - 8388608) / (33554432.0 - 8388608);
    EXPECT_NEAR(model.time_us("reducescatter", 14866432.0, 2, Placement::intra_host), 4700 + t * (24000 - 4700), 1e-6);
    // Beyond the largest size: the fitted line (bus factor 1/2 at 2 ranks).
    const double beyond = 67108864.0;
    EXPECT_NEAR(model.time_us("reducescatter", beyond, 2, Placement::intra_host),
                fits[0].alpha_us + beyond * 0.5 / (fits[0].busbw_gbps * 1e3), 1e-6);
}

// An H100 cluster's comm model with the fits of these sweep reports.
CommModel calibrated_model(const std::vector<std::string>& reports) {
    ClusterSpec cluster;
    cluster.device = device_preset("H100");
    CommModel model(cluster);
    for (const CollectiveFit& fit : fit_collective_reports(reports)) model.add_fit(fit);
    return model;
}

// op avg rows (an --op avg sweep) are fitted as "<collective> avg", apart from the sum's: MPI has
// no average, so parbench's MPI backend divides after the sum. An average without its own fit
// costs what its sum does (NCCL averages inside the reduction).
TEST(PlanCalibration, AveragedSweepPricesAveragesApart) {
    std::vector<std::pair<double, double>> sum_rows, avg_rows;
    for (double bytes : {8.0, 65536.0, 1048576.0, 16777216.0}) {
        sum_rows.push_back({bytes, 5.0 + bytes / 2e3});
        avg_rows.push_back({bytes, 5.0 + bytes / 2e3 + bytes / 4 / 1e3});  // + 1 ns per float divided
    }
    const std::string sums = write_report("sum.json", sweep_text("allreduce", sum_rows));
    const std::string averages = write_report("avg.json", sweep_text("allreduce", avg_rows, "avg"));
    const CommModel model = calibrated_model({sums, averages});
    ASSERT_EQ(model.fits().size(), 2u);
    EXPECT_NEAR(model.time_us("allreduce", 1048576, 2, Placement::intra_host), 5.0 + 1048576 / 2e3, 1e-6);
    EXPECT_NEAR(model.time_us(averaged_collective("allreduce"), 1048576, 2, Placement::intra_host),
                5.0 + 1048576 / 2e3 + 1048576 / 4 / 1e3, 1e-6);
    EXPECT_NE(model.source(averaged_collective("allreduce"), Placement::intra_host).find("--op avg"), std::string::npos);
    EXPECT_DOUBLE_EQ(bus_factor(averaged_collective("allreduce"), 4), 1.5);
    // Only the sum's sweep: the average takes it.
    const CommModel sum_only = calibrated_model({sums});
    EXPECT_DOUBLE_EQ(sum_only.time_us(averaged_collective("allreduce"), 3e6, 4, Placement::intra_host),
                     sum_only.time_us("allreduce", 3e6, 4, Placement::intra_host));
    // No calibration: the preset link, the same for both.
    ClusterSpec cluster;
    cluster.device = device_preset("H100");
    const CommModel preset(cluster);
    EXPECT_DOUBLE_EQ(preset.time_us(averaged_collective("reducescatter"), 3e6, 8, Placement::intra_host),
                     preset.time_us("reducescatter", 3e6, 8, Placement::intra_host));
}

// A --nonblocking sweep (config.nonblocking: the MPI_I* call and its wait) is fitted as
// "<collective>[ avg] nonblocking", apart from the blocking call's; without one, a non-blocking
// call costs what the blocking one does.
TEST(PlanCalibration, NonblockingSweepPricesRequestsApart) {
    std::vector<std::pair<double, double>> blocking_rows, request_rows;
    for (double bytes : {8.0, 65536.0, 1048576.0, 16777216.0}) {
        blocking_rows.push_back({bytes, 5.0 + bytes / 2e3});
        request_rows.push_back({bytes, 9.0 + bytes / 1e3});  // libnbc's schedule: half the bandwidth
    }
    const auto nonblocking = [](std::string text) {
        const std::string at = R"("environment")";
        return text.insert(text.find(at), R"("config":{"nonblocking":true},)");
    };
    const std::string blocking = write_report("blocking-avg.json", sweep_text("allreduce", blocking_rows, "avg"));
    const std::string requests =
        write_report("nonblocking-avg.json", nonblocking(sweep_text("allreduce", request_rows, "avg")));
    const CommModel model = calibrated_model({blocking, requests});
    ASSERT_EQ(model.fits().size(), 2u);
    const std::string averaged = averaged_collective("allreduce");
    EXPECT_NEAR(model.time_us(averaged, 1048576, 2, Placement::intra_host), 5.0 + 1048576 / 2e3, 1e-6);
    EXPECT_NEAR(model.time_us(nonblocking_collective(averaged), 1048576, 2, Placement::intra_host),
                9.0 + 1048576 / 1e3, 1e-6);
    EXPECT_NE(model.source(nonblocking_collective(averaged), Placement::intra_host).find("(--op avg --nonblocking)"),
              std::string::npos);
    EXPECT_DOUBLE_EQ(bus_factor(nonblocking_collective(averaged), 4), 1.5);
    // Only the blocking sweep: the request costs what the blocking call does (plan before --nonblocking).
    const CommModel blocking_only = calibrated_model({blocking});
    EXPECT_DOUBLE_EQ(blocking_only.time_us(nonblocking_collective(averaged), 3e6, 2, Placement::intra_host),
                     blocking_only.time_us(averaged, 3e6, 2, Placement::intra_host));
    // config.nonblocking false is a blocking sweep; anything but true or false is refused, named.
    std::string stated = sweep_text("allreduce", blocking_rows, "avg");
    stated.insert(stated.find(R"("environment")"), R"("config":{"nonblocking":false},)");
    EXPECT_EQ(fit_collective_reports({write_report("stated.json", stated)}).at(0).collective, averaged);
    std::string damaged = sweep_text("allreduce", blocking_rows);
    damaged.insert(damaged.find(R"("environment")"), R"("config":{"nonblocking":"yes"},)");
    try {
        fit_collective_reports({write_report("damaged.json", damaged)});
        ADD_FAILURE() << "a non-boolean config.nonblocking was read";
    } catch (const UsageError& error) {
        EXPECT_NE(std::string(error.what()).find("nonblocking"), std::string::npos) << error.what();
    }
}

TEST(PlanCalibration, RefusesTooFewSizesAndOtherSchemas) {
    const std::string two = R"({"schema":"parbench.report/v1","command":"allreduce","environment":{"world_size":2},"results":[
        {"collective":"allreduce","bytes":8,"time_us":{"median":1}},{"collective":"allreduce","bytes":16,"time_us":{"median":1}}]})";
    EXPECT_THROW(fit_collective_reports({write_report("two.json", two)}), UsageError);
    EXPECT_THROW(fit_collective_reports({write_report("other.json", R"({"schema":"something/v2"})")}), UsageError);
    EXPECT_THROW(fit_collective_reports({write_report("train.json",
                                                      R"({"schema":"parbench.report/v1","command":"train","results":[]})")}),
                 UsageError);
}

}  // namespace
}  // namespace parbench

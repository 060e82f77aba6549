#include "plan/compute_calibration.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/error.hpp"
#include "core/json_file.hpp"
#include "theory/model_flops.hpp"

namespace parbench {
namespace {

struct OpTime {
    double seconds = 0.0;  // per call
    double flops = 0.0;    // per call
    double bytes_per_s = 0.0;
};

double seconds(const nlohmann::json& benchmark) {
    const double time = benchmark.value("real_time", 0.0);
    const std::string unit = benchmark.value("time_unit", std::string("ns"));
    const double scale = unit == "s" ? 1.0 : unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : 1e-9;
    return time * scale;
}

// How many times one step's forward + backward of one micro-batch runs an op of the ops
// bench (src/opsbench/main.cpp): per layer two LayerNorms, two residual adds and one of each
// other block op; the embedding, final LayerNorm, LM head and loss once.
double uses_per_pass(const std::string& op, int layers) {
    const bool head = op.rfind("encoder", 0) == 0 || op.rfind("matmul_lmhead", 0) == 0 ||
                      op.rfind("crossentropy", 0) == 0;
    if (head) return 1.0;
    if (op.rfind("layernorm", 0) == 0) return 2.0 * layers + 1.0;
    if (op.rfind("residual", 0) == 0) return 2.0 * layers;
    return layers;
}

ComputeRate from_ops_report(const nlohmann::json& report, const std::string& path, const ModelConfig& model) {
    std::map<std::string, std::map<std::string, OpTime>> configs;  // "cpu/gpt-small" -> op -> time
    for (const nlohmann::json& b : report["benchmarks"]) {
        if (b.value("run_type", std::string("iteration")) != "iteration") continue;
        std::string name = b.value("name", std::string());
        const auto manual = name.find("/manual_time");  // Google Benchmark's suffix for UseManualTime
        if (manual != std::string::npos) name = name.substr(0, manual);
        const auto last = name.rfind('/');
        if (last == std::string::npos) continue;
        const std::string prefix = name.substr(0, last);
        const std::string op = name.substr(last + 1);
        OpTime t;
        t.seconds = seconds(b);
        t.flops = b.value("FLOP/s", 0.0) * t.seconds;
        t.bytes_per_s = b.value("bytes/s", 0.0);
        configs[prefix][op] = t;
    }
    // The config named like the model, else the widest GPT config (one that has attention).
    std::string chosen;
    for (const auto& [prefix, ops] : configs) {
        if (!ops.count("attention_forward")) continue;
        if (prefix.substr(prefix.find('/') + 1) == model.name) {
            chosen = prefix;
            break;
        }
        if (chosen.empty() || ops.at("matmul_fc_forward").flops > configs[chosen].at("matmul_fc_forward").flops)
            chosen = prefix;
    }
    if (chosen.empty())
        throw UsageError("--calibrate-compute " + path + ": no GPT ops in this parbench-ops report; run parbench-ops "
                         "--benchmark_filter='cpu/gpt-small/' --benchmark_out=ops.json");
    const auto& ops = configs[chosen];
    static const std::map<std::string, ModelConfig> shapes = {
        {"gpt-tiny", ModelConfig{"gpt-tiny", "", ModelKind::gpt, 2, 64, 4, 32, 256}},
        {"gpt-small", ModelConfig{"gpt-small", "", ModelKind::gpt, 4, 256, 8, 128, 2048}}};
    const std::string config = chosen.substr(chosen.find('/') + 1);
    if (!shapes.count(config))
        throw UsageError("--calibrate-compute " + path + ": unknown ops config " + config);
    const ModelConfig& shape = shapes.at(config);
    constexpr int bench_batch = 4;  // the ops bench's micro-batch (docs/ops.md)
    double pass_seconds = 0.0;
    for (const auto& [op, t] : ops) {
        if (op == "adamw_update") continue;
        pass_seconds += uses_per_pass(op, shape.layers) * t.seconds;
    }
    ComputeRate rate;
    rate.tflops_per_gpu = megatron_gpt_flops(bench_batch, shape.seq_len, shape.layers, shape.hidden, shape.vocab) /
                          pass_seconds / 1e12;
    rate.source = "--calibrate-compute " + path + ": the " + chosen +
                  " ops (forward + backward, each weighted by its uses per pass), the model FLOPs of that shape "
                  "over their summed time";
    // The ops bench times one thread on the host it ran on.
    const nlohmann::json context = report.value("context", nlohmann::json::object());
    if (chosen.rfind("cpu/", 0) == 0 && context.contains("num_cpus") && context["num_cpus"].is_number_integer()) {
        rate.measured_cores = context["num_cpus"].get<int>();
        rate.measured_ranks_per_host = 1;
    }
    for (const auto& [prefix, ops_of] : configs)
        if (ops_of.count("adamw_update")) {
            rate.optimizer_gbps = ops_of.at("adamw_update").bytes_per_s / 1e9;
            rate.optimizer_source = "--calibrate-compute " + path + ": " + prefix + "/adamw_update bytes/s";
            break;
        }
    return rate;
}

ComputeRate from_train_report(const nlohmann::json& report, const std::string& path) {
    const nlohmann::json& result = report["results"].at(0);
    if (!result.contains("achieved_tflops_per_rank"))
        throw UsageError("--calibrate-compute " + path + ": the train report has no achieved_tflops_per_rank");
    ComputeRate rate;
    rate.tflops_per_gpu = result["achieved_tflops_per_rank"].get<double>();
    rate.includes_optimizer = true;
    const nlohmann::json layout = result.value("layout", nlohmann::json::object());
    rate.source = "--calibrate-compute " + path + ": achieved TFLOP/s per rank of a train run (" +
                  result["model"].value("name", std::string("?")) + ", dp " + std::to_string(layout.value("dp", 1)) +
                  " x tp " + std::to_string(layout.value("tp", 1)) + " x pp " + std::to_string(layout.value("pp", 1)) +
                  "; optimizer and exposed communication included)";
    const nlohmann::json environment = report.value("environment", nlohmann::json::object());
    if (environment.value("device_kind", std::string()) == "cpu" && environment.value("cpu_cores", 0) > 0) {
        rate.measured_cores = environment["cpu_cores"].get<int>();
        const nlohmann::json ranks_per_host = environment.value("ranks_per_host", nlohmann::json::object());
        for (const auto& [host, ranks] : ranks_per_host.items())
            rate.measured_ranks_per_host = std::max(rate.measured_ranks_per_host, ranks.get<int>());
        if (rate.measured_ranks_per_host > rate.measured_cores) {
            const double ranks_per_core = static_cast<double>(rate.measured_ranks_per_host) / rate.measured_cores;
            rate.tflops_per_gpu *= ranks_per_core;
            char note[160];
            std::snprintf(note, sizeof note, "; measured with %d ranks on %d cores, so x %.3g to one rank with a core "
                          "of its own", rate.measured_ranks_per_host, rate.measured_cores, ranks_per_core);
            rate.source += note;
        }
    }
    return rate;
}

}  // namespace

ComputeRate calibrate_compute(const std::string& path, const ModelConfig& model) {
    const nlohmann::json report = read_json_file(path);
    if (report.is_object() && report.contains("benchmarks") && report["benchmarks"].is_array())
        return from_ops_report(report, path, model);
    if (report.is_object() && report.value("schema", std::string()) == "parbench.report/v1" &&
        report.value("command", std::string()) == "train" && report.contains("results") &&
        report["results"].is_array() && !report["results"].empty())
        return from_train_report(report, path);
    throw UsageError("--calibrate-compute " + path + ": neither a parbench-ops report (--benchmark_format=json) nor a "
                     "parbench train report; give one of those");
}

nlohmann::json to_json(const ComputeRate& rate) {
    return {{"tflops_per_gpu", rate.tflops_per_gpu},
            {"source", rate.source},
            {"optimizer_gbps", rate.optimizer_gbps ? nlohmann::json(*rate.optimizer_gbps) : nlohmann::json(nullptr)},
            {"optimizer_source", rate.optimizer_source},
            {"includes_optimizer", rate.includes_optimizer},
            {"measured_cores", rate.measured_cores > 0 ? nlohmann::json(rate.measured_cores) : nlohmann::json(nullptr)},
            {"measured_ranks_per_host",
             rate.measured_ranks_per_host > 0 ? nlohmann::json(rate.measured_ranks_per_host) : nlohmann::json(nullptr)}};
}

}  // namespace parbench

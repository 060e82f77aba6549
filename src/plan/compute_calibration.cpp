#include "plan/compute_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "core/percentile.hpp"
#include "plan/cluster.hpp"
#include "theory/model_flops.hpp"

namespace parbench {
namespace {

struct OpTime {
    double seconds = 0.0;  // per call
    double flops = 0.0;    // per call
    double bytes_per_s = 0.0;
};

double seconds(const JsonFields& benchmark) {
    const double time = benchmark.number("real_time", 0, 1e15, true);
    const std::string unit = benchmark.optional_string("time_unit").value_or("ns");
    if (unit != "s" && unit != "ms" && unit != "us" && unit != "ns")
        throw UsageError(benchmark.name("time_unit") + " is \"" + unit + "\"; Google Benchmark writes ns, us, ms or s");
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

ComputeRate from_ops_report(const JsonFields& report, const std::string& source, const ModelConfig& model) {
    std::map<std::string, std::map<std::string, OpTime>> configs;  // "cpu/gpt-small" -> op -> time
    const std::size_t count = report.array("benchmarks").size();
    for (std::size_t i = 0; i < count; ++i) {
        const JsonFields b = report.element("benchmarks", i);
        if (b.optional_string("run_type").value_or("iteration") != "iteration") continue;
        std::string name = b.optional_string("name").value_or("");
        const auto manual = name.find("/manual_time");  // Google Benchmark's suffix for UseManualTime
        if (manual != std::string::npos) name = name.substr(0, manual);
        const auto last = name.rfind('/');
        if (last == std::string::npos) continue;
        const std::string prefix = name.substr(0, last);
        const std::string op = name.substr(last + 1);
        OpTime t;
        t.seconds = seconds(b);
        t.flops = b.optional_number("FLOP/s", 0, 1e21).value_or(0.0) * t.seconds;
        t.bytes_per_s = b.optional_number("bytes/s", 0, 1e18).value_or(0.0);
        configs[prefix][op] = t;
    }
    // The config named like the model, else the widest GPT config (one that has attention).
    std::string chosen;
    for (const auto& [prefix, ops] : configs) {
        if (!ops.count("attention_forward") || !ops.count("matmul_fc_forward")) continue;
        if (prefix.substr(prefix.find('/') + 1) == model.name) {
            chosen = prefix;
            break;
        }
        if (chosen.empty() || ops.at("matmul_fc_forward").flops > configs[chosen].at("matmul_fc_forward").flops)
            chosen = prefix;
    }
    if (chosen.empty())
        throw UsageError(source + ": no GPT ops in this parbench-ops report; run parbench-ops "
                         "--benchmark_filter='cpu/gpt-small/' --benchmark_out=ops.json");
    const auto& ops = configs[chosen];
    static const std::map<std::string, ModelConfig> shapes = {
        {"gpt-tiny", ModelConfig{"gpt-tiny", "", ModelKind::gpt, 2, 64, 4, 32, 256}},
        {"gpt-small", ModelConfig{"gpt-small", "", ModelKind::gpt, 4, 256, 8, 128, 2048}}};
    const std::string config = chosen.substr(chosen.find('/') + 1);
    if (!shapes.count(config))
        throw UsageError(source + ": unknown ops config " + config + " (parbench-ops times gpt-tiny and gpt-small)");
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
    if (!(std::isfinite(rate.tflops_per_gpu) && rate.tflops_per_gpu > 0 && rate.tflops_per_gpu <= cluster_limits::max_tflops))
        throw UsageError(source + ": the " + chosen + " ops' times give " + std::to_string(rate.tflops_per_gpu) +
                         " TFLOP/s, not a physical rate; rerun parbench-ops");
    rate.measured_on_cpu = chosen.rfind("cpu/", 0) == 0;
    rate.source = source + ": the " + chosen +
                  " ops (forward + backward, each weighted by its uses per pass), the model FLOPs of that shape "
                  "over their summed time";
    // The ops bench times one thread on the host it ran on.
    if (rate.measured_on_cpu && report.has("context")) {
        if (const auto cores = report.object("context").optional_integer("num_cpus", 1, cluster_limits::max_cores_per_host)) {
            rate.measured_cores = static_cast<int>(*cores);
            rate.measured_ranks_per_host = 1;
        }
    }
    for (const auto& [prefix, ops_of] : configs)
        if (ops_of.count("adamw_update") && ops_of.at("adamw_update").bytes_per_s > 0) {
            rate.optimizer_gbps = ops_of.at("adamw_update").bytes_per_s / 1e9;
            rate.optimizer_source = source + ": " + prefix + "/adamw_update bytes/s";
            break;
        }
    return rate;
}

ComputeRate from_train_report(const JsonFields& report, const std::string& source) {
    const JsonFields result = report.element("results", 0);
    ComputeRate rate;
    rate.tflops_per_gpu = result.number("achieved_tflops_per_rank", 0, cluster_limits::max_tflops, true);
    rate.includes_optimizer = true;
    const std::string model = result.has("model") ? result.object("model").optional_string("name").value_or("?") : "?";
    std::int64_t dp = 1, tp = 1, pp = 1, cp = 1;
    ComputeRate::MeasuredRun run;
    run.model = model;
    if (result.has("layout")) {
        const JsonFields layout = result.object("layout");
        dp = layout.optional_integer("dp", 1, cluster_limits::max_gpus).value_or(1);
        tp = layout.optional_integer("tp", 1, cluster_limits::max_gpus).value_or(1);
        pp = layout.optional_integer("pp", 1, cluster_limits::max_gpus).value_or(1);
        cp = layout.optional_integer("cp", 1, cluster_limits::max_gpus).value_or(1);
        run.microbatches =
            static_cast<int>(layout.optional_integer("microbatches", 1, std::int64_t{1} << 30).value_or(1));
        run.recompute = layout.optional_string("recompute").value_or("none");
    }
    run.ranks = static_cast<int>(dp * tp * pp * cp);
    run.global_batch = static_cast<int>(result.optional_integer("global_batch", 1, std::int64_t{1} << 30).value_or(0));
    if (result.has("step_time_ms"))
        run.step_ms = result.object("step_time_ms").optional_number("median", 0, 1e12, true).value_or(0.0);
    if (run.global_batch > 0 && run.step_ms > 0) rate.run = run;
    rate.source = source + ": achieved TFLOP/s per rank of a train run (" + model + ", dp " + std::to_string(dp) +
                  " x tp " + std::to_string(tp) + " x pp " + std::to_string(pp) +
                  "; optimizer and exposed communication included)";
    if (!report.has("environment")) return rate;
    const JsonFields environment = report.object("environment");
    rate.measured_on_cpu = environment.optional_string("device_kind").value_or("") == "cpu";
    const auto cores = environment.optional_integer("cpu_cores", 0, cluster_limits::max_cores_per_host);
    if (rate.measured_on_cpu && cores && *cores > 0) {
        rate.measured_cores = static_cast<int>(*cores);
        if (environment.has("ranks_per_host")) {
            const JsonFields ranks_per_host = environment.object("ranks_per_host");
            for (const auto& [host, ranks] : ranks_per_host.json().items())
                rate.measured_ranks_per_host = std::max(
                    rate.measured_ranks_per_host,
                    static_cast<int>(ranks_per_host.integer(host, 1, cluster_limits::max_gpus_per_host)));
        }
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

ComputeRate calibrate_compute_document(const nlohmann::json& report, const std::string& path,
                                       const ModelConfig& model) {
    const std::string source = "--calibrate-compute " + path;
    if (report.is_object() && report.contains("benchmarks"))
        return from_ops_report(JsonFields(report, source), source, model);
    if (report.is_object() && report.value("schema", nlohmann::json()) == "parbench.report/v1" &&
        report.value("command", nlohmann::json()) == "train")
        return from_train_report(JsonFields(report, source), source);
    throw UsageError(source + ": neither a parbench-ops report (--benchmark_format=json) nor a "
                     "parbench train report; give one of those");
}

ComputeRate calibrate_compute(const std::string& path, const ModelConfig& model) {
    nlohmann::json report;
    try {
        report = read_json_file(path);
    } catch (const UsageError& error) {
        throw UsageError(std::string("--calibrate-compute: ") + error.what());
    }
    return calibrate_compute_document(report, path, model);
}

BusyCompute calibrate_busy_compute(const std::vector<std::string>& paths, const ModelConfig& model,
                                   const ComputeRate& alone) {
    const std::string flag = "--calibrate-compute-busy";
    if (paths.size() < 2)
        throw UsageError(flag + ": give two or more train reports of one-rank runs started together (one per core "
                         "they keep busy), e.g. scripts/plan/validate_plan.sh's compute-busy-*.json");
    if (!alone.run || !alone.measured_on_cpu)
        throw UsageError(flag + " needs --calibrate-compute with a one-rank train report measured on this CPU host "
                         "(the same run alone)");
    BusyCompute busy;
    busy.run = *alone.run;
    busy.ranks = static_cast<int>(paths.size());
    std::vector<double> steps;
    std::string latest_start, earliest_finish, host;
    for (const std::string& path : paths) {
        nlohmann::json document;
        try {
            document = read_json_file(path);
        } catch (const UsageError& error) {
            throw UsageError(flag + ": " + error.what());
        }
        const ComputeRate rate = calibrate_compute_document(document, path, model);
        const std::string source = flag + " " + path;
        if (!rate.run || !rate.measured_on_cpu || rate.run->ranks != 1)
            throw UsageError(source + ": not a one-rank train report measured on a CPU; give one-rank runs started "
                             "together on the host");
        const ComputeRate::MeasuredRun& run = *rate.run;
        if (run.model != busy.run.model || run.global_batch != busy.run.global_batch ||
            run.microbatches != busy.run.microbatches || run.recompute != busy.run.recompute)
            throw UsageError(source + ": a run of " + run.model + ", batch " + std::to_string(run.global_batch) +
                             "; --calibrate-compute's ran " + busy.run.model + ", batch " +
                             std::to_string(busy.run.global_batch) + ": give the same run, started together");
        if (rate.measured_cores > 0 && busy.ranks > rate.measured_cores)
            throw UsageError(flag + ": " + std::to_string(busy.ranks) + " runs on a host of " +
                             std::to_string(rate.measured_cores) + " cores time-slice them (plan's compute share "
                             "prices that); give at most one run per core");
        const std::string started = document.value("started_at", std::string());
        const std::string finished = document.value("finished_at", std::string());
        const auto& environment = document.value("environment", nlohmann::json::object());
        const auto hosts = environment.value("hosts", nlohmann::json::array());
        const std::string run_host = hosts.is_array() && !hosts.empty() && hosts[0].is_string() ? hosts[0].get<std::string>() : "";
        if (started.empty() || finished.empty())
            throw UsageError(source + ": no started_at and finished_at, so whether the runs computed at once is unknown");
        if (host.empty()) host = run_host;
        if (run_host != host)
            throw UsageError(source + ": ran on host " + run_host + ", another run on " + host + "; give runs of one host");
        // ISO 8601 UTC stamps of one form compare as strings.
        latest_start = std::max(latest_start, started);
        earliest_finish = earliest_finish.empty() ? finished : std::min(earliest_finish, finished);
        steps.push_back(run.step_ms);
    }
    if (latest_start > earliest_finish)
        throw UsageError(flag + ": the runs did not overlap (one started at " + latest_start + ", after another finished "
                         "at " + earliest_finish + "); start them together");
    busy.run.step_ms = percentile(steps, 0.5);
    char text[200];
    std::snprintf(text, sizeof text, "%s: %d one-rank runs started together on one host, median step %.4g ms", flag.c_str(),
                  busy.ranks, busy.run.step_ms);
    busy.source = text;
    return busy;
}

std::optional<double> ops_optimizer_gbps(const std::string& path) {
    const nlohmann::json report = read_json_file(path);
    if (!report.is_object() || !report.contains("benchmarks") || !report["benchmarks"].is_array()) return std::nullopt;
    for (const nlohmann::json& b : report["benchmarks"]) {
        const nlohmann::json rate = b.value("bytes/s", nlohmann::json());
        if (b.value("name", std::string()).find("/adamw_update") != std::string::npos && rate.is_number() &&
            std::isfinite(rate.get<double>()) && rate.get<double>() > 0)
            return rate.get<double>() / 1e9;
    }
    return std::nullopt;
}

nlohmann::json to_json(const ComputeRate& rate) {
    return {{"tflops_per_gpu", rate.tflops_per_gpu},
            {"source", rate.source},
            {"optimizer_gbps", rate.optimizer_gbps ? nlohmann::json(*rate.optimizer_gbps) : nlohmann::json(nullptr)},
            {"optimizer_source", rate.optimizer_source},
            {"includes_optimizer", rate.includes_optimizer},
            {"measured_on_cpu", rate.measured_on_cpu},
            {"measured_cores", rate.measured_cores > 0 ? nlohmann::json(rate.measured_cores) : nlohmann::json(nullptr)},
            {"measured_ranks_per_host",
             rate.measured_ranks_per_host > 0 ? nlohmann::json(rate.measured_ranks_per_host) : nlohmann::json(nullptr)}};
}

}  // namespace parbench

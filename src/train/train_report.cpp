#include "train/train_report.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "bench/statistics.hpp"
#include "plan/memory.hpp"
#include "train/pipeline/pipeline_report.hpp"
#include "train/tensor_parallel_cost.hpp"

namespace parbench {
namespace {

nlohmann::json optional_number(const std::optional<double>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json summary_json(const Summary& s) {
    return {{"mean", s.mean}, {"median", s.median}, {"min", s.min}, {"max", s.max}, {"p95", s.p95},
            {"stddev", optional_number(s.stddev)}};
}

nlohmann::json groups_json(const MeshShape& mesh) {
    return {{"dp", mesh_all_groups(mesh, MeshDimension::dp)},
            {"tp", mesh_all_groups(mesh, MeshDimension::tp)},
            {"pp", mesh_all_groups(mesh, MeshDimension::pp)}};
}

nlohmann::json memory_json(const MemoryUsage& usage) {
    return {{"params", usage.peak_of(MemoryCategory::params)},
            {"grads", usage.peak_of(MemoryCategory::grads)},
            {"optimizer", usage.peak_of(MemoryCategory::optimizer)},
            {"activations_peak", usage.peak_of(MemoryCategory::activations)},
            {"total_peak", usage.total_peak}};
}

std::string human_count(double value) {
    std::ostringstream text;
    text << std::fixed << std::setprecision(2);
    if (value >= 1e9)
        text << value / 1e9 << "B";
    else if (value >= 1e6)
        text << value / 1e6 << "M";
    else
        text << value / 1e3 << "K";
    return text.str();
}

double mib(const nlohmann::json& bytes) { return bytes.get<double>() / (1024.0 * 1024.0); }

nlohmann::json comm_json(const CommStats& stats, double steps) {
    nlohmann::json comm = nlohmann::json::object();
    for (const auto& [op, counter] : stats.by_op)
        comm[op] = {{"calls", static_cast<double>(counter.calls) / steps},
                    {"bytes", static_cast<double>(counter.bytes) / steps},
                    {"time_ms", counter.time_ms / steps}};
    return comm;
}

// The tensor-parallel traffic the layout implies (tensor_parallel_cost.hpp), beside what
// was measured: comm.expected_bytes.tp, comm.expected_calls.tp, and comm.expected_matches.tp,
// true when every collective's calls and bytes agree.
void add_expected_tp(const TrainSummaryInputs& in, nlohmann::json& comm) {
    const nlohmann::json measured = comm["tp"];
    const TrainOptions& o = in.plan.options;
    const int microbatch_size = o.global_batch / in.mesh.dp / o.microbatches;
    const auto expected = tensor_parallel_traffic_per_step(in.plan.model, in.plan.seq_len, microbatch_size,
                                                           o.microbatches, in.plan.tensor_split(0), in.plan.recompute);
    nlohmann::json bytes = nlohmann::json::object();
    nlohmann::json calls = nlohmann::json::object();
    bool matches = measured.size() == expected.size();
    for (const auto& [op, volume] : expected) {
        bytes[op] = volume.bytes;
        calls[op] = volume.calls;
        matches = matches && measured.contains(op) && measured[op]["bytes"].get<double>() == volume.bytes &&
                  measured[op]["calls"].get<double>() == volume.calls;
    }
    comm["expected_bytes"] = {{"tp", bytes}};
    comm["expected_calls"] = {{"tp", calls}};
    comm["expected_matches"] = {{"tp", matches}};
}

// The buffer-aware theory (plan/memory.hpp, the formula `parbench plan` uses): every buffer
// the engine allocates, from the model, layout and flags alone, for the most loaded rank.
nlohmann::json predicted_memory_json(const TrainSummaryInputs& in, const MemoryUsage& measured) {
    const RankMemory predicted = engine_peak_memory(engine_layout(in.plan, in.mesh));
    nlohmann::json items = nlohmann::json::array();
    for (const MemoryItem& item : predicted.items)
        items.push_back({{"category", memory_category_name(item.category)}, {"name", item.name},
                         {"count", item.count}, {"bytes_each", item.bytes_each}, {"bytes", item.bytes()}});
    const double total = predicted.total();
    const double measured_total = static_cast<double>(measured.total_peak);
    return {{"params", predicted.of(MemoryCategory::params)},
            {"grads", predicted.of(MemoryCategory::grads)},
            {"optimizer", predicted.of(MemoryCategory::optimizer)},
            {"activations", predicted.of(MemoryCategory::activations)},
            {"total", total},
            {"pp_rank", predicted.pp_rank},
            {"relative_error", total > 0 ? (measured_total - total) / total : 0.0},
            {"items", items},
            {"method", "every buffer the engine allocates (parameters, gradients, optimizer state, bucket and gather "
                       "slots, staging shards, activation stores and slots, scratch), counted from the model, layout "
                       "and flags alone by plan/memory.hpp, the formula parbench plan uses; the most loaded rank"}};
}

nlohmann::json activation_json(const TrainSummaryInputs& in) {
    const TrainOptions& o = in.plan.options;
    nlohmann::json activation = {{"measured_bytes_per_layer", in.measurements.activation_bytes_per_layer},
                                 {"method", "bytes one layer keeps from forward for backward for one micro-batch, "
                                            "allocated from the ledger (the MLP: the mean over its layers); "
                                            "the largest rank"}};
    if (!in.plan.model.has_sequence()) return activation;
    const ActivationFormula formula = transformer_activation_bytes_per_layer(
        in.plan.model, in.plan.seq_len, o.global_batch / in.mesh.dp / o.microbatches, in.plan.tensor_split(0),
        in.plan.recompute);
    activation["recompute"] = recompute_name(in.plan.recompute);
    activation["formula_bytes_per_layer"] = formula.bytes;
    activation["formula"] = formula.formula;
    if (!formula.paper_formula.empty()) {
        activation["paper_bytes_per_layer"] = formula.paper_bytes;
        activation["paper_formula"] = formula.paper_formula;
    }
    return activation;
}

}  // namespace

std::string scheme_name(const TrainPlan& plan) {
    if (plan.scheme.zero_stage == 0) return "ddp";
    return "zero" + std::to_string(plan.scheme.zero_stage);
}

nlohmann::json train_result_json(const TrainSummaryInputs& in) {
    const TrainOptions& o = in.plan.options;
    const TrainMeasurements& m = in.measurements;
    const Summary step = summarize(m.step_ms);
    const Summary exposed = summarize(m.exposed_comm_ms);
    const double tokens_per_step =
        static_cast<double>(o.global_batch) * (in.plan.model.has_sequence() ? in.plan.seq_len : 1);
    const double flops = model_flops_per_step(in.plan.model, o.global_batch, in.plan.seq_len);
    const double median_s = step.median / 1000.0;
    const double achieved_tflops = flops / median_s / static_cast<double>(in.mesh.world()) / 1e12;
    const double hardware_flops =
        flops + recompute_flops_per_step(in.plan.model, o.global_batch, in.plan.seq_len, in.plan.recompute);
    const double hardware_tflops = hardware_flops / median_s / static_cast<double>(in.mesh.world()) / 1e12;

    nlohmann::json model = to_json(in.plan.model);
    model["parameters"] = m.parameters;
    model["shape"]["seq_len_trained"] = in.plan.seq_len;

    // The largest rank's figures: ranks differ only by padding.
    MemoryUsage largest;
    for (const MemoryUsage& usage : m.memory_by_rank)
        if (usage.total_peak >= largest.total_peak) largest = usage;
    nlohmann::json by_rank = nlohmann::json::array();
    for (const MemoryUsage& usage : m.memory_by_rank) by_rank.push_back(memory_json(usage));
    const TheoreticalMemory theory =
        zero_theoretical_memory(m.parameters_per_rank, in.mesh.dp, in.plan.scheme.zero_stage);

    const double steps = static_cast<double>(o.steps);
    nlohmann::json comm = {{"dp", comm_json(m.dp_comm, steps)}, {"tp", comm_json(m.tp_comm, steps)}};
    add_expected_tp(in, comm);

    nlohmann::json result = {
        {"model", model},
        {"layout",
         {{"dp", in.mesh.dp},
          {"tp", in.mesh.tp},
          {"pp", in.mesh.pp},
          {"sp", o.sp},
          {"tp_style", o.tp_style},
          {"zero", in.plan.scheme.zero_stage},
          {"scheme", in.scheme_name},
          {"schedule", "none"},
          {"microbatches", o.microbatches},
          {"microbatch_size", o.global_batch / in.mesh.dp / o.microbatches},
          {"overlap", o.overlap},
          {"prefetch", o.prefetch},
          {"recompute", recompute_name(in.plan.recompute)},
          {"bucket_mb", static_cast<double>(in.plan.scheme.bucket_bytes) / (1024.0 * 1024.0)},
          {"bucket_source", in.plan.bucket_source},
          {"groups", groups_json(in.mesh)}}},
        {"precision", o.precision},
        {"global_batch", o.global_batch},
        {"seq_len", in.plan.seq_len},
        {"tokens_per_step", tokens_per_step},
        {"warmup", o.warmup},
        {"steps", o.steps},
        {"timing", "barrier, step (forward + backward of every micro-batch, gradient collectives, optimizer), "
                   "device sync; each step's time is the max over ranks"},
        {"step_time_ms", summary_json(step)},
        {"step_time_samples_ms", m.step_ms},
        {"tokens_per_s", tokens_per_step / median_s},
        {"throughput_basis", "median step time"},
        {"flops",
         {{"per_step", flops},
          {"formula", flops_formula(in.plan.model)},
          {"causal_discount", false},
          {"recompute", recompute_name(in.plan.recompute)},
          {"hardware_per_step", hardware_flops}}},
        {"achieved_tflops_per_rank", achieved_tflops},
        {"peak_tflops_per_rank", optional_number(in.peak.tflops)},
        {"peak_source", in.peak.source},
        {"mfu", in.peak.tflops ? nlohmann::json(achieved_tflops / *in.peak.tflops) : nlohmann::json(nullptr)},
        {"hfu", in.peak.tflops ? nlohmann::json(hardware_tflops / *in.peak.tflops) : nlohmann::json(nullptr)},
        {"memory_bytes", memory_json(largest)},
        {"memory_bytes_by_rank", by_rank},
        {"memory_method", "device buffers allocated by the engine, tagged by category (peak per category; "
                          "total_peak is the peak of the sum); the largest rank"},
        {"memory_theoretical_bytes",
         {{"params", theory.params},
          {"grads", theory.grads},
          {"optimizer", theory.optimizer},
          {"total", theory.total()},
          {"convention", "ZeRO (arXiv 1910.02054) model states for fp32 Adam: 4 + 4 + 8 = 16 B/param of this "
                         "rank's tensor-parallel shard, divided by dp per stage; activations and buffers not "
                         "included"}}},
        {"memory_predicted_bytes", predicted_memory_json(in, largest)},
        {"activation_memory", activation_json(in)},
        {"comm", comm},
        {"comm_method", "rank 0's group of each parallel dimension, per timed step: calls, bytes (nccl-tests' size "
                        "convention) and host time inside the calls (issue time for non-blocking ones); "
                        "expected: the analytic tensor-parallel traffic of the layout (docs/tensor.md)"},
        {"exposed_comm_ms", exposed.mean},
        {"exposed_comm_method", "host time per step blocked in communication (blocking calls, issuing, waits), "
                                "max over ranks, mean over timed steps"},
        {"loss", m.loss},
        {"loss_steps", "every step in order, the first `warmup` of them warm-up; mean over the global batch"},
    };
    if (in.check) {
        result["check"] = {{"max_rel_diff_loss", in.check->max_rel_diff_loss},
                           {"max_rel_diff_params", in.check->max_rel_diff_params},
                           {"tolerance", {{"loss", in.check->tolerance_loss}, {"params", in.check->tolerance_params}}},
                           {"worst_tensor", in.check->worst_tensor},
                           {"method", "loss: max over steps of |parallel - serial| / |serial|; params: max over tensors "
                                      "of ||parallel - serial||_2 / ||serial||_2"},
                           {"reference", "the same model, seed, data and global batch on a world of one (serial)"},
                           {"passed", in.check->passed}};
    }
    if (m.pipeline) add_pipeline_results(result, in.plan, in.mesh, *m.pipeline, m.memory_by_rank);
    result["warnings"] = train_warnings(m);
    return result;
}

std::vector<std::string> train_warnings(const TrainMeasurements& measurements) {
    std::vector<std::string> warnings;
    for (const std::string& warning : sample_warnings(measurements.step_ms, SampleFlags{"--steps", "--warmup"}))
        warnings.push_back("step times: " + warning);
    return warnings;
}

void print_train_header(std::ostream& out, const TrainPlan& plan, const MeshShape& mesh, std::size_t parameters,
                        const std::string& device_kind) {
    const TrainOptions& o = plan.options;
    const ModelConfig& c = plan.model;
    out << "# parbench train: " << c.name << " (" << model_kind_name(c.kind) << ", "
        << human_count(static_cast<double>(parameters)) << " parameters: " << c.layers << " layers, hidden "
        << c.hidden;
    if (c.has_sequence()) out << ", " << c.heads << " heads, seq " << plan.seq_len << ", vocab " << c.vocab;
    if (c.kind == ModelKind::llama) out << ", " << c.kv_heads << " kv heads, ffn " << c.ffn_hidden;
    out << ")\n";
    out << "# layout: dp " << mesh.dp << " x tp " << mesh.tp;
    if (mesh.tp > 1) out << " (" << o.tp_style << (o.sp ? ", sequence parallel" : "") << ")";
    out << " x pp " << mesh.pp << ", "
        << (plan.scheme.zero_stage == 0 ? std::string("DDP") : "ZeRO-" + std::to_string(plan.scheme.zero_stage));
    if (o.overlap) out << ", overlapped gradient collectives";
    if (o.prefetch) out << ", prefetch";
    out << "; global batch " << o.global_batch << " = " << mesh.dp << " ranks x " << o.microbatches
        << " micro-batches x " << o.global_batch / mesh.dp / o.microbatches << "; " << o.precision << " on "
        << device_kind << "\n";
    out << "# method: " << o.warmup << " warm-up + " << o.steps
        << " timed steps; barrier, step, device sync; each step's time is the max over ranks\n";
}

void print_train_summary(std::ostream& out, const nlohmann::json& r) {
    const auto& t = r["step_time_ms"];
    char line[1024];
    std::snprintf(line, sizeof line, "%-28s %10s %10s %10s %10s %10s\n", "step time (ms)", "median", "mean", "min",
                  "max", "p95");
    out << line;
    std::snprintf(line, sizeof line, "%-28s %10.3f %10.3f %10.3f %10.3f %10.3f\n", "", t["median"].get<double>(),
                  t["mean"].get<double>(), t["min"].get<double>(), t["max"].get<double>(), t["p95"].get<double>());
    out << line;
    std::snprintf(line, sizeof line, "%-28s %.1f\n", "tokens/s", r["tokens_per_s"].get<double>());
    out << line;
    std::snprintf(line, sizeof line, "%-28s %.4g (model FLOPs/step %.4g)\n", "achieved TFLOP/s per rank",
                  r["achieved_tflops_per_rank"].get<double>(), r["flops"]["per_step"].get<double>());
    out << line;
    if (r["mfu"].is_null())
        out << "MFU                          unknown (no peak for this device; give --peak-tflops)\n";
    else {
        std::snprintf(line, sizeof line, "%-28s %.1f%% of %.4g TFLOP/s (%s)\n", "MFU", 100.0 * r["mfu"].get<double>(),
                      r["peak_tflops_per_rank"].get<double>(), r["peak_source"].get<std::string>().c_str());
        if (r["flops"]["recompute"] != "none") {
            out << line;
            std::snprintf(line, sizeof line,
                          "%-28s %.1f%% (hardware FLOPs/step %.4g: --recompute %s adds its forward)\n", "HFU",
                          100.0 * r["hfu"].get<double>(), r["flops"]["hardware_per_step"].get<double>(),
                          r["flops"]["recompute"].get<std::string>().c_str());
        }
        out << line;
    }
    std::snprintf(line, sizeof line, "%-28s %.3f of %.3f per step\n", "exposed comm (ms)",
                  r["exposed_comm_ms"].get<double>(), t["mean"].get<double>());
    out << line;
    const auto& mem = r["memory_bytes"];
    const auto& theory = r["memory_theoretical_bytes"];
    std::snprintf(line, sizeof line, "%-28s %10s %10s %10s %10s %10s\n", "memory per rank (MiB)", "params", "grads",
                  "optimizer", "activ.", "total");
    out << line;
    std::snprintf(line, sizeof line, "%-28s %10.2f %10.2f %10.2f %10.2f %10.2f\n", "  measured (peak)",
                  mib(mem["params"]), mib(mem["grads"]), mib(mem["optimizer"]), mib(mem["activations_peak"]),
                  mib(mem["total_peak"]));
    out << line;
    std::snprintf(line, sizeof line, "%-28s %10.2f %10.2f %10.2f %10s %10.2f\n", "  theory (ZeRO, 16 B/param)",
                  mib(theory["params"]), mib(theory["grads"]), mib(theory["optimizer"]), "-", mib(theory["total"]));
    out << line;
    const auto& predicted = r["memory_predicted_bytes"];
    std::snprintf(line, sizeof line, "%-28s %10.2f %10.2f %10.2f %10.2f %10.2f  (measured %+.2f%%)\n",
                  "  theory (every buffer)", mib(predicted["params"]), mib(predicted["grads"]),
                  mib(predicted["optimizer"]), mib(predicted["activations"]), mib(predicted["total"]),
                  100.0 * predicted["relative_error"].get<double>());
    out << line;
    if (r["layout"]["scheme"] != "zero3") {
        std::snprintf(line, sizeof line, "%-28s %.4g MiB (%s)\n", "gradient bucket", r["layout"]["bucket_mb"].get<double>(),
                      r["layout"]["bucket_source"].get<std::string>().c_str());
        out << line;
    }
    const auto& activation = r["activation_memory"];
    if (activation.contains("formula_bytes_per_layer")) {
        std::snprintf(line, sizeof line, "%-28s %.4g MiB measured, %.4g MiB formula", "activations per layer",
                      mib(activation["measured_bytes_per_layer"]), mib(activation["formula_bytes_per_layer"]));
        out << line;
        if (activation.contains("paper_bytes_per_layer")) {
            std::snprintf(line, sizeof line, ", %.4g MiB paper (16-bit)", mib(activation["paper_bytes_per_layer"]));
            out << line;
        }
        out << "\n";
    }
    for (const std::string dimension : {"dp", "tp"}) {
        for (const auto& [op, counter] : r["comm"][dimension].items()) {
            std::snprintf(line, sizeof line, "%-28s %g calls, %.4g MB, %.3f ms per step\n",
                          ("comm " + dimension + " " + op).c_str(), counter["calls"].get<double>(),
                          counter["bytes"].get<double>() / 1e6, counter["time_ms"].get<double>());
            out << line;
        }
    }
    const auto& expected_tp = r["comm"]["expected_bytes"]["tp"];
    if (!expected_tp.empty()) {
        double bytes = 0.0;
        for (const auto& [op, value] : expected_tp.items()) bytes += value.get<double>();
        std::snprintf(line, sizeof line, "%-28s %.4g MB per step, %s the measured\n", "comm tp expected",
                      bytes / 1e6, r["comm"]["expected_matches"]["tp"].get<bool>() ? "equal to" : "DIFFERENT FROM");
        out << line;
    }
    const auto& loss = r["loss"];
    std::snprintf(line, sizeof line, "%-28s %.5f -> %.5f over %zu steps\n", "loss", loss.front().get<double>(),
                  loss.back().get<double>(), loss.size());
    out << line;
    if (r.contains("check")) {
        const auto& c = r["check"];
        std::snprintf(line, sizeof line, "%-28s %s (loss %.2e <= %.0e, params %.2e <= %.0e in %s)\n",
                      "check vs serial", c["passed"].get<bool>() ? "passed" : "FAILED",
                      c["max_rel_diff_loss"].get<double>(), c["tolerance"]["loss"].get<double>(),
                      c["max_rel_diff_params"].get<double>(), c["tolerance"]["params"].get<double>(),
                      c["worst_tensor"].get<std::string>().c_str());
        out << line;
    }
}

}  // namespace parbench

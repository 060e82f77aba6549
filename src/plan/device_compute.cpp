#include "plan/device_compute.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "core/json_file.hpp"

namespace parbench {
namespace {

// Element-wise kernels stream at about 80 % of HBM's data-sheet bandwidth (an assumption, the
// fraction copy kernels typically reach; --gemm-curve does not change it).
constexpr double memory_fraction = 0.8;

// A100's sustained fraction is the one fitted number, chosen on both papers' tables
// (scripts/validate_plan_papers.py): arXiv 2205.05198 table 5 alone is best fitted by 0.76 (median
// |error| 1.5 %), under which arXiv 2104.04473 table 1 misses out of sample (7.2 %, max 11.5 %); the
// papers disagree by 8-10 % on the same layouts (1T: 94.4 s against 102.6 s derived; 530B: 49.1
// against 54.1), so 0.73 meets the goal on both. The other parts: the same fraction of their
// data-sheet peaks, an assumption until a parbench-ops report (--gemm-curve) replaces it. The
// per-call overhead is a kernel launch plus one wave's fill and tail (assumed).
constexpr double a100_sustained = 0.73;
constexpr double gemm_overhead_us = 10.0;

}  // namespace

double DeviceCompute::efficiency(double gemm_flops) const {
    if (gemm_flops <= 0) return 0.0;
    const double seconds = gemm_flops / (peak_tflops * 1e12 * gemm.sustained) + gemm.overhead_us * 1e-6;
    return gemm_flops / (seconds * peak_tflops * 1e12);
}

double DeviceCompute::gemm_ms(const Gemm& g) const {
    // Roofline: a product whose operands and result take longer to move than its FLOPs take to
    // compute (low arithmetic intensity) runs at memory speed.
    const double compute_s = g.flops() / (peak_tflops * 1e12 * gemm.sustained);
    const double memory_s = g.bytes() / (memory_gbps * 1e9 * memory_fraction);
    return (std::max(compute_s, memory_s) + gemm.overhead_us * 1e-6) * 1e3;
}

double DeviceCompute::memory_ms(double bytes) const { return bytes / (memory_gbps * 1e9 * memory_fraction) * 1e3; }

double DeviceCompute::pass_ms(const PassWork& work) const {
    double ms = memory_ms(work.memory_bytes);
    for (const Gemm& g : work.gemms) ms += gemm_ms(g);
    return ms;
}

std::optional<DeviceCompute> device_compute_preset(const DeviceSpec& device, bool bf16) {
    static const std::vector<std::string> gpus{"A100", "H100", "H200", "B200"};
    const bool preset = std::find(gpus.begin(), gpus.end(), device.name) != gpus.end();
    if (!preset && device.gemm_sustained <= 0) return std::nullopt;
    DeviceCompute c;
    c.peak_tflops = bf16 ? device.peak_tflops_bf16 : device.peak_tflops_fp32;
    c.gemm.sustained = a100_sustained;
    c.gemm.overhead_us = gemm_overhead_us;
    c.gemm.source = device.name == "A100"
                        ? "A100: sustained 0.73 of peak fitted on arXiv 2205.05198 table 5 and arXiv 2104.04473 table 1; "
                          "10 us per call (launch, fill, tail; assumed)"
                        : device.name + ": A100's fitted 0.73 of the data-sheet peak and 10 us per call, assumed; "
                                        "measure it with parbench-ops and pass --gemm-curve";
    c.memory_gbps = device.memory_bandwidth_gbps;
    c.memory_fraction = memory_fraction;
    c.memory_source = device.source + " HBM " + std::to_string(static_cast<int>(device.memory_bandwidth_gbps)) +
                      " GB/s x 0.8 reached by element-wise kernels (assumed)";
    // A --cluster file's own figures (it cites their sources) replace the preset's.
    if (device.gemm_sustained > 0 || device.gemm_overhead_us > 0) {
        if (device.gemm_sustained > 0) c.gemm.sustained = device.gemm_sustained;
        if (device.gemm_overhead_us > 0) c.gemm.overhead_us = device.gemm_overhead_us;
        c.gemm.source = device.source + ": sustained " + std::to_string(c.gemm.sustained) + " of peak, " +
                        std::to_string(c.gemm.overhead_us) + " us per call";
    }
    if (device.memory_fraction > 0) {
        c.memory_fraction = device.memory_fraction;
        c.memory_source = device.source + ": HBM " + std::to_string(static_cast<int>(device.memory_bandwidth_gbps)) +
                          " GB/s x " + std::to_string(device.memory_fraction);
    }
    return c;
}

GemmCurve fit_gemm_curve(const std::string& path, double peak_tflops) {
    nlohmann::json report;
    try {
        report = read_json_file(path);
    } catch (const UsageError& e) {
        throw UsageError("--gemm-curve " + path + ": " + e.what());
    }
    if (!report.is_object() || !report.contains("benchmarks") || !report["benchmarks"].is_array())
        throw UsageError("--gemm-curve " + path + ": not a parbench-ops report (no \"benchmarks\" array)");
    // (FLOPs, seconds) of every matmul entry; time = FLOPs x slope + intercept by least squares,
    // slope = 1 / (peak x sustained), intercept = the per-call overhead.
    std::vector<std::pair<double, double>> points;
    for (const nlohmann::json& b : report["benchmarks"]) {
        const std::string name = b.value("name", std::string());
        if (name.find("matmul") == std::string::npos && name.find("gemm") == std::string::npos) continue;
        if (b.value("run_type", std::string("iteration")) != "iteration" || !b.contains("FLOP/s")) continue;
        const double time = b.value("real_time", 0.0);
        const std::string unit = b.value("time_unit", std::string("ns"));
        const double seconds = time * (unit == "s" ? 1.0 : unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : 1e-9);
        const double flops = b["FLOP/s"].get<double>() * seconds;
        if (seconds > 0 && flops > 0) points.emplace_back(flops, seconds);
    }
    if (points.size() < 2)
        throw UsageError("--gemm-curve " + path + ": needs 2 or more matmul entries with FLOP/s; run parbench-ops "
                         "--benchmark_filter=matmul --benchmark_out=ops.json");
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    const double n = static_cast<double>(points.size());
    for (const auto& [x, y] : points) {
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    const double denominator = n * sxx - sx * sx;
    double slope = denominator > 0 ? (n * sxy - sx * sy) / denominator : 0.0;
    double intercept = (sy - slope * sx) / n;
    if (!(slope > 0)) {  // all one size: no overhead can be told apart
        slope = sy / sx;
        intercept = 0;
    }
    if (intercept < 0) {  // the fit through the origin
        slope = sxy / sxx;
        intercept = 0;
    }
    GemmCurve curve;
    curve.sustained = 1.0 / (slope * peak_tflops * 1e12);
    curve.overhead_us = intercept * 1e6;
    curve.source = "--gemm-curve " + path + ": fitted to " + std::to_string(points.size()) + " matmul entries";
    return curve;
}

nlohmann::json to_json(const DeviceCompute& c) {
    return {{"peak_tflops", c.peak_tflops},
            {"gemm_sustained", c.gemm.sustained},
            {"gemm_overhead_us", c.gemm.overhead_us},
            {"gemm_source", c.gemm.source},
            {"gemm_efficiency_at",
             {{"1 GFLOP", c.efficiency(1e9)}, {"10 GFLOP", c.efficiency(1e10)}, {"100 GFLOP", c.efficiency(1e11)},
              {"1 TFLOP", c.efficiency(1e12)}}},
            {"memory_gbps", c.memory_gbps},
            {"memory_fraction", c.memory_fraction},
            {"memory_source", c.memory_source},
            {"time", "each GEMM FLOPs / (peak x sustained) + overhead; element-wise bytes / (HBM x fraction)"}};
}

}  // namespace parbench

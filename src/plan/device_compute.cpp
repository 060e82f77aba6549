#include "plan/device_compute.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/error.hpp"
#include "core/json_file.hpp"

namespace parbench {
namespace {

// Each preset's GEMM curve and where it comes from: measurements of GEMMs alone, never a training
// run. H100, H200 and B200: XLA's default matmul performance table (openxla/xla,
// xla/service/gpu/model/matmul_interpolator_data.h, as vendored in tensorflow/tensorflow
// third_party/xla; bf16 x bf16 -> bf16 TFLOP/s of batched GEMMs b x m x n x k, b 1-4, m n k
// 256-4096, measured per compute capability), this curve's roofline fitted by least squares of
// log time over the entries of 1 GFLOP or more, the largest shapes checked against the Maximum
// Achievable Matmul FLOPS table (stas00/ml-engineering, compute/accelerator/README.md: the best of
// a shape search, torch 2.6-2.7). A100: that table has no sm_80 entries, so the MAMF figure
// itself (271.2 of 312 TFLOP/s, 0.869; the sm_90 fit is 0.97 of its MAMF, so A100's is the more
// generous of the two readings); its per-call overhead is a kernel launch plus one wave's fill
// and tail (assumed).
//
// A training step runs these kernels slower than they run alone (clocks under a whole step's
// power draw, NCCL's kernels on the same SMs, the neighbours' HBM and L2 traffic): one factor,
// fitted on the in-sample tables only (scripts/plan/validate_plan_papers.py --fit-in-step: arXiv
// 2205.05198 table 5 and arXiv 2104.04473 table 1 on A100, naive attention, so only the GEMM
// curve moves), the value whose larger of the two tables' median |error| is least on a 0.005
// grid from 0.80 to 0.90: 0.840 (table 5 median |error| 3.7 %, max 7.0 %; table 1 4.2 %, 9.0 %;
// at 0.835 4.3 / 3.8 %, at 0.845 3.4 / 4.6 %; table 5 alone is best near 0.87, table 1 near
// 0.80). Refit whenever the step's other parts change (it was 0.835 before the frameworks' loss
// kernels were priced, theory/layer_work.cpp head_work). The tables disagree by 8-10 % on the same layouts (1T on t8 p64: 94.4 s
// against 102.6 s derived), which bounds any fit. Applied unchanged to every preset, which is
// what makes the H100 tables out of sample.
constexpr double in_step_factor = 0.840;
constexpr const char* in_step_source =
    "x 0.840 in a step: what the GEMMs of arXiv 2205.05198 table 5 and arXiv 2104.04473 table 1 (A100) reached of "
    "the same kernels alone, fitted on those tables only";

struct CurvePreset {
    const char* device;
    double sustained;
    double overhead_us;
    const char* source;
    AttentionRate attention{};  // none: flash attention's products on the GEMM curve
    // FP8 GEMMs: the Maximum Achievable Matmul FLOPS table's measured fraction of the FP8 peak
    // (ml-engineering, float8_e4m3fn, the best of a shape search; no table by shape is published
    // for FP8 on sm_90); 0: no FP8 (A100).
    double fp8_sustained = 0.0;
    // Streaming multiprocessors (NVIDIA's data sheets: A100 108, H100 and H200 SXM 132, B200 148):
    // what Transformer Engine's communication SMs are a share of (plan/tp_comm_overlap.hpp).
    double sms = 0.0;
};

// Flash attention on sm_90, as Megatron-core runs it (Transformer Engine's fused attention
// backend on Hopper is cuDNN's): FlashAttention-3 (arXiv 2407.08608) fig. 5-6, H100 80GB SXM5,
// bf16, head dim 128, sequences of 4k-8k (batch x sequence 16k tokens), cuDNN forward 609-600 and
// backward 499-518 TFLOP/s of 989. Not causal: a causal kernel skips the blocks above the diagonal
// and is taken at the same rate on the half it computes (theory/layer_work.hpp). PyTorch's SDPA of
// 2024 ran FlashAttention-2, 368-370 forward and 310-318 backward in the same figures: a
// cluster file says so with flash_forward_fraction / flash_backward_fraction.
const AttentionRate sm90_cudnn_attention{
    0.61, 0.515,
    "flash attention at cuDNN's measured rate on H100 (arXiv 2407.08608 fig. 5-6: 605 forward, 509 backward TFLOP/s "
    "at head dim 128, 4k-8k tokens)"};
const CurvePreset curve_presets[] = {
    {"A100", 0.869, 10.0,
     "A100: sustained 0.869 of peak alone, the Maximum Achievable Matmul FLOPS search (ml-engineering: 271.2 of 312 "
     "TFLOP/s, torch 2.6); 10 us per call (launch, fill, tail; assumed)",
     {}, 0.0, 108},
    // sm_90: 181 entries of 1 GFLOP or more (of 224 read from the table), median |error| of the fit
    // 4.7 % on them; the largest reach 0.79-0.82 of peak, MAMF 794.5 of 989 TFLOP/s (0.80).
    {"H100", 0.776, 6.0,
     "H100: sustained 0.776 of peak and 6 us per call, fitted to XLA's measured sm_90 bf16 GEMM table "
     "(matmul_interpolator_data.h, 181 shapes of 1 GFLOP or more); MAMF 0.80 at its best shape (ml-engineering)",
     sm90_cudnn_attention, 1402.6 / 1979.0, 132},
    // H200 is an H100 die (sm_90, same SMs, clocks and bf16 peak) with HBM3e: the MAMF table
    // notes H200's bf16 MAMF as the same as H100's. Its element-wise work runs at its own HBM.
    {"H200", 0.776, 6.0,
     "H200: H100's sm_90 curve (same die and peak; the MAMF table gives H200's bf16 as H100's): sustained 0.776, "
     "6 us per call, fitted to XLA's measured sm_90 bf16 GEMM table",
     sm90_cudnn_attention, 1453.4 / 1979.0, 132},
    // sm_100: 64 entries of 1 GFLOP or more (of 76 read from the sm_100 part of the table),
    // median |error| 5.7 %; its largest shapes reach 0.69 of peak where the MAMF search found 0.776
    // (1745 of 2250 TFLOP/s at 1792x16128x3072): XLA's kernels of the table's date leave Blackwell
    // further below its peak, so this curve is the cautious one of the two.
    {"B200", 0.662, 7.5,
     "B200: sustained 0.662 of peak and 7.5 us per call, fitted to XLA's measured sm_100 bf16 GEMM table "
     "(matmul_interpolator_data.h, 64 shapes of 1 GFLOP or more); MAMF 0.776 at its best shape (ml-engineering)",
     {}, 3432.5 / 4500.0, 148},
};

// Element-wise kernels stream at about 80 % of HBM's data-sheet bandwidth (an assumption, the
// fraction copy kernels typically reach; --gemm-curve does not change it).
constexpr double memory_fraction = 0.8;

const CurvePreset* curve_preset(const std::string& device) {
    for (const CurvePreset& preset : curve_presets)
        if (device == preset.device) return &preset;
    return nullptr;
}

// A --cluster file's own flash attention rate replaces the preset's (its software's kernel).
void apply_attention_rate(DeviceCompute& c, const DeviceSpec& device) {
    if (device.flash_forward_fraction <= 0 && device.flash_backward_fraction <= 0) return;
    if (device.flash_forward_fraction > 0) c.attention.forward = device.flash_forward_fraction;
    if (device.flash_backward_fraction > 0) c.attention.backward = device.flash_backward_fraction;
    char text[128];
    std::snprintf(text, sizeof text, ": flash attention at %.3g (forward) and %.3g (backward) of peak",
                  c.attention.forward, c.attention.backward);
    c.attention.source = device.source + text;
}

std::string memory_source(const DeviceSpec& device, double fraction, bool assumed) {
    char text[96];
    std::snprintf(text, sizeof text, " HBM %.0f GB/s x %.2g%s", device.memory_bandwidth_gbps, fraction,
                  assumed ? " reached by element-wise kernels (assumed)" : "");
    return device.source + text;
}

}  // namespace

double DeviceCompute::efficiency(double gemm_flops) const {
    if (gemm_flops <= 0) return 0.0;
    const double seconds = gemm_flops / (peak_tflops * 1e12 * gemm.sustained * in_step) + gemm.overhead_us * 1e-6;
    return gemm_flops / (seconds * peak_tflops * 1e12);
}

double DeviceCompute::gemm_ms(const Gemm& g) const {
    // A fused attention kernel's products at its own measured rate (its tiles stay on chip).
    const double fused = g.role == GemmRole::fused_attention_forward    ? attention.forward
                         : g.role == GemmRole::fused_attention_backward ? attention.backward
                                                                        : 0.0;
    if (fused > 0) return (g.flops() / (peak_tflops * 1e12 * fused * in_step) + gemm.overhead_us * 1e-6) * 1e3;
    const bool linear = g.role == GemmRole::linear || g.role == GemmRole::linear_weight_grad;
    if (fp8_linear && linear && fp8_peak_tflops > 0) {
        const double cast_bytes = g.role == GemmRole::linear ? 3.0 * g.m * g.k * g.count : 0.0;
        Gemm operands = g;
        operands.element_bytes = 1.0;
        const double compute_s = g.flops() / (fp8_peak_tflops * 1e12 * fp8.sustained * in_step);
        const double memory_s = operands.bytes() / (memory_gbps * 1e9 * memory_fraction);
        return (std::max(compute_s, memory_s) + fp8.overhead_us * 1e-6) * 1e3 + memory_ms(cast_bytes);
    }
    // Roofline: a product whose operands and result take longer to move than its FLOPs take to
    // compute (low arithmetic intensity) runs at memory speed.
    const double compute_s = g.flops() / (peak_tflops * 1e12 * gemm.sustained * in_step);
    const double memory_s = g.bytes() / (memory_gbps * 1e9 * memory_fraction);
    return (std::max(compute_s, memory_s) + gemm.overhead_us * 1e-6) * 1e3;
}

double DeviceCompute::memory_ms(double bytes) const { return bytes / (memory_gbps * 1e9 * memory_fraction) * 1e3; }

double DeviceCompute::pass_ms(const PassWork& work) const {
    double ms = memory_ms(work.memory_bytes);
    for (const Gemm& g : work.gemms) ms += gemm_ms(g);
    return ms * step_scale;
}

std::optional<DeviceCompute> device_compute_model(const DeviceSpec& device, bool bf16) {
    const CurvePreset* preset = curve_preset(device.gemm_preset);
    if (!preset && device.gemm_sustained <= 0) return std::nullopt;
    DeviceCompute c;
    c.peak_tflops = bf16 ? device.peak_tflops_bf16 : device.peak_tflops_fp32;
    if (preset) {
        c.gemm = {preset->sustained, preset->overhead_us, preset->source};
        c.attention = preset->attention;
        c.in_step = in_step_factor;
        c.sms = preset->sms;
        c.in_step_source = in_step_source;
        if (preset->fp8_sustained > 0 && device.peak_tflops_fp8 > 0) {
            c.fp8_peak_tflops = device.peak_tflops_fp8;
            char text[160];
            std::snprintf(text, sizeof text, "%s FP8: %.3g of %.0f TFLOP/s (MAMF table, float8_e4m3fn), %.3g us per call",
                          device.gemm_preset.c_str(), preset->fp8_sustained, device.peak_tflops_fp8, preset->overhead_us);
            c.fp8 = {preset->fp8_sustained, preset->overhead_us, text};
        }
        if (device.gemm_preset != device.name) c.gemm.source = device.source + " takes the " + c.gemm.source;
    }
    c.memory_gbps = device.memory_bandwidth_gbps;
    c.memory_fraction = memory_fraction;
    c.memory_source = memory_source(device, memory_fraction, true);
    // A --cluster file's own figures (it cites their sources) replace the preset's; a curve of its
    // own without an overhead has none.
    if (device.gemm_sustained > 0 || device.gemm_overhead_us > 0) {
        if (device.gemm_sustained > 0) {
            c.gemm.sustained = device.gemm_sustained;
            c.in_step = 1.0;  // the file's own figure is what its steps' GEMMs reach
            c.in_step_source = device.source + ": gemm_sustained taken as the in-step rate";
        }
        if (device.gemm_overhead_us > 0 || !preset) c.gemm.overhead_us = device.gemm_overhead_us;
        char text[96];
        std::snprintf(text, sizeof text, ": sustained %.3g of peak, %.3g us per call", c.gemm.sustained,
                      c.gemm.overhead_us);
        c.gemm.source = device.source + text + (preset ? " (over the " + device.gemm_preset + " preset's)" : "");
    }
    if (device.memory_fraction > 0) {
        c.memory_fraction = device.memory_fraction;
        c.memory_source = memory_source(device, device.memory_fraction, false);
    }
    apply_attention_rate(c, device);
    return c;
}

DeviceCompute resolve_device_compute(const DeviceSpec& device, bool bf16, const std::string& gemm_curve_report,
                                     const std::string& source) {
    std::optional<DeviceCompute> c = device_compute_model(device, bf16);
    if (!gemm_curve_report.empty()) {
        if (!c) {
            // The fit brings the curve; the device its peak and memory bandwidth.
            c.emplace();
            c->peak_tflops = bf16 ? device.peak_tflops_bf16 : device.peak_tflops_fp32;
            c->memory_gbps = device.memory_bandwidth_gbps;
            c->memory_fraction = device.memory_fraction > 0 ? device.memory_fraction : memory_fraction;
            c->memory_source = memory_source(device, c->memory_fraction, device.memory_fraction <= 0);
            apply_attention_rate(*c, device);
        }
        c->gemm = fit_gemm_curve(gemm_curve_report, c->peak_tflops);
        c->in_step = 1.0;  // what the step adds is --calibrate-compute's step_scale
        c->in_step_source = "--gemm-curve: taken as it is";
    }
    if (!c)
        throw UsageError(source + ": device \"" + device.name + "\" has no GEMM curve; name the preset whose curve it "
                         "takes (\"gemm_preset\": \"A100\", H100, H200 or B200, in its device) or give its own "
                         "(\"gemm_sustained\" and \"gemm_overhead_us\", or --gemm-curve OPS_REPORT from parbench-ops)");
    return *c;
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
    // (FLOPs, calls, seconds) of every matmul entry: time = FLOPs x slope + calls x overhead,
    // slope = 1 / (peak x sustained), fitted by least squares of the relative error (so the small
    // GEMMs that show the overhead count as much as the large ones that show the slope). A
    // backward entry is two GEMMs (the input's and the weight's gradients).
    struct Point {
        double flops, calls, seconds;
    };
    std::vector<Point> points;
    for (const nlohmann::json& b : report["benchmarks"]) {
        const std::string name = b.value("name", std::string());
        if (name.find("matmul") == std::string::npos && name.find("gemm") == std::string::npos) continue;
        if (b.value("run_type", std::string("iteration")) != "iteration" || !b.contains("FLOP/s")) continue;
        const double time = b.value("real_time", 0.0);
        const std::string unit = b.value("time_unit", std::string("ns"));
        const double seconds = time * (unit == "s" ? 1.0 : unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : 1e-9);
        const double flops = b["FLOP/s"].get<double>() * seconds;
        const double calls = name.find("backward") != std::string::npos ? 2.0 : 1.0;
        if (seconds > 0 && flops > 0) points.push_back({flops, calls, seconds});
    }
    if (points.size() < 2)
        throw UsageError("--gemm-curve " + path + ": needs 2 or more matmul entries with FLOP/s; run parbench-ops "
                         "--benchmark_filter=matmul --benchmark_out=ops.json");
    // Normal equations of min sum ((slope x F + overhead x c) / t - 1)^2.
    double ff = 0, fc = 0, cc = 0, f1 = 0, c1 = 0;
    for (const Point& p : points) {
        const double x = p.flops / p.seconds, y = p.calls / p.seconds;
        ff += x * x;
        fc += x * y;
        cc += y * y;
        f1 += x;
        c1 += y;
    }
    const double denominator = ff * cc - fc * fc;
    double slope = denominator > 0 ? (f1 * cc - fc * c1) / denominator : 0.0;
    double intercept = denominator > 0 ? (ff * c1 - fc * f1) / denominator : 0.0;
    if (!(slope > 0) || intercept < 0) {  // one size, or no overhead to tell apart: the fit through the origin
        slope = f1 / ff;
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
            {"in_step", c.in_step},
            {"in_step_source", c.in_step_source},
            {"gemm_efficiency_at",
             {{"1 GFLOP", c.efficiency(1e9)}, {"10 GFLOP", c.efficiency(1e10)}, {"100 GFLOP", c.efficiency(1e11)},
              {"1 TFLOP", c.efficiency(1e12)}}},
            {"flash_attention",
             c.attention.forward > 0 || c.attention.backward > 0
                 ? nlohmann::json{{"forward_fraction", c.attention.forward},
                                  {"backward_fraction", c.attention.backward},
                                  {"source", c.attention.source}}
                 : nlohmann::json("on the GEMM curve")},
            {"fp8", c.fp8_peak_tflops > 0 ? nlohmann::json{{"peak_tflops", c.fp8_peak_tflops},
                                                           {"sustained", c.fp8.sustained},
                                                           {"overhead_us", c.fp8.overhead_us},
                                                           {"source", c.fp8.source},
                                                           {"linear_layers_in_fp8", c.fp8_linear}}
                                          : nlohmann::json(nullptr)},
            {"sms", c.sms},
            {"memory_gbps", c.memory_gbps},
            {"memory_fraction", c.memory_fraction},
            {"memory_source", c.memory_source},
            {"step_scale", c.step_scale},
            {"step_scale_source", c.step_scale_source},
            {"time", "each GEMM FLOPs / (peak x sustained x in_step) + overhead; element-wise bytes / (HBM x fraction)"}};
}

}  // namespace parbench

// How long one rank takes for a pass's work (theory/layer_work.hpp) on a device: each GEMM at a
// fraction of the dense peak that depends on its size, each memory-bound element-wise op at a
// fraction of HBM bandwidth. The GEMM curve is
//
//   time(GEMM) = max(FLOPs / (peak x sustained), bytes / (HBM x fraction)) + overhead,
//   efficiency(FLOPs) = FLOPs / (time x peak) for a compute-bound call
//
// (the roofline of NVIDIA's "Matrix Multiplication Background" guide: attention's per-head
// products, with the head dimension as k, have too few FLOPs per byte to reach the peak)
// sustained: the fraction of peak cuBLAS holds on large bf16 GEMMs; overhead: per call, the
// launch, the pipeline fill and the last wave's tail, which is what makes small GEMMs (a tp
// split, a micro-batch of one short sequence, one head's attention) run below it. Presets per
// device cite their sources (device_compute.cpp); --gemm-curve fits both numbers to the user's
// parbench-ops report by least squares of time on FLOPs.
//
// Which curve a device takes is never guessed: a preset its own, a --cluster file's device the
// preset it names ("gemm_preset") or its own numbers, or --gemm-curve's fit; a device with none
// of these is refused (resolve_device_compute), where plan once fell back to a flat rate.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "plan/cluster.hpp"
#include "theory/layer_work.hpp"

namespace parbench {

struct GemmCurve {
    double sustained = 0.0;    // fraction of the dense peak on large GEMMs
    double overhead_us = 0.0;  // per GEMM call
    std::string source;
};

// The fused attention kernel's rate (flash attention's products, theory/layer_work.hpp), as
// fractions of the dense peak for its forward and its backward; 0: on the GEMM curve.
struct AttentionRate {
    double forward = 0.0, backward = 0.0;
    std::string source;
};

struct DeviceCompute {
    double peak_tflops = 0.0;          // dense, in the plan's precision
    GemmCurve gemm;
    AttentionRate attention;
    // What a training step's tensor-core kernels (the GEMM curve, FP8's, the fused attention
    // kernel's) reach of the rate they reach alone: a preset's curves are measurements of kernels
    // alone, and one factor (device_compute.cpp, in_step_factor, fitted on the A100 papers' tables)
    // takes every preset into a step. 1: a curve the user gives (a --cluster file's own
    // gemm_sustained, --gemm-curve) is taken as it is; a measured train run sets step_scale instead.
    double in_step = 1.0;
    std::string in_step_source;
    // FP8 linear layers (plan --fp8, Transformer Engine's recipe and torchtitan's Float8): the
    // linear layers' GEMMs at the FP8 peak on `fp8` (its sustained fraction, the bf16 curve's
    // overhead), each activation operand cast to FP8 first (read 2 B, write 1 B per element: the
    // forward's input and the backward's output gradient; the weight gradient reuses both).
    // Attention and element-wise work stay in bf16. fp8_peak_tflops 0: the device has no FP8.
    double fp8_peak_tflops = 0.0;
    GemmCurve fp8;
    bool fp8_linear = false;
    double sms = 0.0;                  // streaming multiprocessors (a preset's data sheet); 0: unknown
    double memory_gbps = 0.0;          // HBM, decimal GB/s
    double memory_fraction = 0.0;      // of HBM bandwidth that element-wise kernels reach
    std::string memory_source;
    // Every pass's time times this: 1, or what a measured train run of the same model says the
    // curve's isolated kernels miss inside a step (plan/stage_compute.hpp, measured_step_scale:
    // on a CPU host the ops' cache-warm timings sum to ~80 % of the same work in a step).
    double step_scale = 1.0;
    std::string step_scale_source;
    double efficiency(double gemm_flops) const;  // of peak, for one call of this many FLOPs
    double gemm_ms(const Gemm& gemm) const;
    double memory_ms(double bytes) const;
    double pass_ms(const PassWork& work) const;  // GEMMs, then the element-wise traffic
};

// The compute model of a device in this precision: the curve of its gemm_preset, its own
// numbers over it, or its own alone; nullopt for a device with neither.
std::optional<DeviceCompute> device_compute_model(const DeviceSpec& device, bool bf16);

// The model plan computes with: device_compute_model, its GEMM curve replaced by the fit to
// `gemm_curve_report` when one is given (any device: the fit brings the curve). UsageError naming
// `source` (the --cluster file or --device) and the two ways out for a device with no curve.
DeviceCompute resolve_device_compute(const DeviceSpec& device, bool bf16, const std::string& gemm_curve_report,
                                     const std::string& source);

// Fit the GEMM curve to the matmul entries (names with "matmul" or "gemm", counters FLOP/s) of a
// parbench-ops report. UsageError naming --gemm-curve for a report with fewer than 2 of them.
GemmCurve fit_gemm_curve(const std::string& path, double peak_tflops);

nlohmann::json to_json(const DeviceCompute& compute);

}  // namespace parbench

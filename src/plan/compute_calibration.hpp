// The compute rate a plan divides model FLOPs by, and where it came from: the device's peak
// at an assumed efficiency, or calibrated from a parbench-ops report (the training ops of a
// GPT config, weighted by how often a step runs each) or a train report (its achieved
// TFLOP/s per rank, which includes everything the step does but communication it exposes).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "theory/model_config.hpp"

namespace parbench {

struct ComputeRate {
    double tflops_per_gpu = 0.0;           // achieved on the model's FLOPs (the train formula)
    std::string source;
    std::optional<double> optimizer_gbps;  // AdamW's memory traffic rate, when measured
    std::string optimizer_source;
    bool includes_optimizer = false;       // a train-report rate already holds the optimizer's time
    // The CPU host the rate was measured on, when the report says (a train report's
    // environment on the cpu backend, an ops report's CPU context): its cores, and the most
    // ranks that ran on one host. A train run with more ranks than cores shared each core, so
    // its achieved rate per rank is scaled by ranks / cores to one rank with a core of its own:
    // tflops_per_gpu is always that unshared rate (plan/cluster.hpp's compute_share shares it).
    int measured_cores = 0;
    int measured_ranks_per_host = 0;
    // The rate was measured on a CPU (an ops report's cpu/ ops, a train report on the cpu
    // backend): planning a GPU with it would carry a CPU's speed onto the GPU.
    bool measured_on_cpu = false;
    // A train report's run as measured: what --gemm-curve's device model is set to by
    // (plan/stage_compute.hpp, measured_step_scale). Absent for an ops report.
    struct MeasuredRun {
        std::string model;
        int ranks = 0;  // dp x tp x pp x cp
        int global_batch = 0, microbatches = 1;
        std::string recompute = "none";
        double step_ms = 0.0;  // the median step, optimizer included
    };
    std::optional<MeasuredRun> run;
};

// UsageError naming --calibrate-compute for an unreadable or unrecognised report, or an ops
// report without a GPT config's ops. `model` picks the ops config of the same name when present.
// Every key read is checked (type, finite, range), a refusal naming the file and key.
ComputeRate calibrate_compute(const std::string& path, const ModelConfig& model);
ComputeRate calibrate_compute_document(const nlohmann::json& report, const std::string& path, const ModelConfig& model);

// One-rank train runs started together on one CPU host, one per core they kept busy (plan
// --calibrate-compute-busy; plan/host_contention.hpp): the compute level when the host's cores
// all compute. `alone`: --calibrate-compute's one-rank run, whose model, batch, micro-batches and
// recompute each must repeat. UsageError naming the flag and the file for fewer than two runs, a
// run of several ranks, another shape, another host, more runs than its cores, or runs whose
// started_at..finished_at do not overlap (they did not compute at once).
struct BusyCompute {
    ComputeRate::MeasuredRun run;  // alone's shape; step_ms the median of the runs' median steps
    int ranks = 0;                 // runs that computed at once
    std::string source;
};
BusyCompute calibrate_busy_compute(const std::vector<std::string>& paths, const ModelConfig& model,
                                   const ComputeRate& alone);

// The AdamW update's memory rate of a parbench-ops report (its */adamw_update bytes/s), for a
// --gemm-curve report to price the optimizer by; nullopt when it has none. `source` names it.
std::optional<double> ops_optimizer_gbps(const std::string& path);

nlohmann::json to_json(const ComputeRate& rate);

}  // namespace parbench

// The training log, in Megatron-LM's form (megatron/training/training.py's training_log, read
// for its fields): one line per --log-interval steps with the time, iteration / total,
// consumed samples, elapsed ms per iteration (the interval's mean), learning rate, loss (the
// interval's mean: Megatron's "lm loss"), grad norm (the last step's), tokens/s (samples/s
// for a model without tokens), model TFLOP/s per rank and MFU over the interval, the peak
// memory so far and the skipped and NaN iterations so far. Each step's own figures go in
// the report's progress.steps with the same names.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "train/metrics.hpp"
#include "train/train_options.hpp"
#include "train/train_run.hpp"

namespace parbench {

class IterationLog {
  public:
    // `world`: the ranks the model FLOPs are shared by; `peak`: per rank, for the MFU.
    IterationLog(const TrainPlan& plan, int world, const PeakFlops& peak, int log_interval);

    // Every finished step in order; the line to print when it closes an interval (or is the last).
    std::optional<std::string> step_finished(const StepProgress& step);
    // The step's own figures, for the report's progress.steps.
    nlohmann::json step_json(const StepProgress& step) const;

  private:
    struct Figures {  // over one or more steps
        double time_ms = 0.0;     // per step
        double per_second = 0.0;  // tokens (or samples) per second
        double tflops_per_rank = 0.0;
        std::optional<double> mfu;
    };
    Figures figures(int steps, double total_ms) const;
    std::string line(const StepProgress& last, const Figures& interval, double mean_loss) const;

    int world_;
    int global_batch_;
    double units_per_step_;  // tokens (models with a sequence) or samples per step
    bool tokens_;
    double flops_per_step_;
    std::optional<double> peak_tflops_;
    double learning_rate_;
    int log_interval_;
    // The interval so far, and the run's counts.
    int interval_steps_ = 0;
    double interval_ms_ = 0.0;
    double interval_loss_ = 0.0;
    int nan_iterations_ = 0;
};

// "2026-12-05 10:04:07", local time, Megatron's timestamp.
std::string log_timestamp(std::chrono::system_clock::time_point when);

}  // namespace parbench

#include "cli/iteration_log.hpp"

#include <cmath>
#include <cstdio>
#include <ctime>

#include "theory/model_flops.hpp"

namespace parbench {

std::string log_timestamp(std::chrono::system_clock::time_point when) {
    const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
    std::tm local{};
    localtime_r(&seconds, &local);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
    return text;
}

IterationLog::IterationLog(const TrainPlan& plan, int world, const PeakFlops& peak, int log_interval)
    : world_(world), global_batch_(plan.layout.global_batch),
      units_per_step_(static_cast<double>(plan.layout.global_batch) *
                      (plan.layout.model.has_sequence() ? plan.layout.seq_len : 1)),
      tokens_(plan.layout.model.has_sequence()),
      flops_per_step_(model_flops_per_step(plan.layout.model, plan.layout.global_batch, plan.layout.seq_len)),
      peak_tflops_(peak.tflops), learning_rate_(plan.options.lr), log_interval_(log_interval) {}

IterationLog::Figures IterationLog::figures(int steps, double total_ms) const {
    Figures f;
    f.time_ms = total_ms / steps;
    const double seconds = total_ms / 1000.0;
    f.per_second = units_per_step_ * steps / seconds;
    f.tflops_per_rank = flops_per_step_ * steps / seconds / static_cast<double>(world_) / 1e12;
    if (peak_tflops_) f.mfu = f.tflops_per_rank / *peak_tflops_;
    return f;
}

std::optional<std::string> IterationLog::step_finished(const StepProgress& step) {
    if (!std::isfinite(step.loss) || !std::isfinite(step.grad_norm)) ++nan_iterations_;
    ++interval_steps_;
    interval_ms_ += step.time_ms;
    interval_loss_ += step.loss;
    if ((step.step + 1) % log_interval_ != 0 && step.step + 1 != step.total_steps && std::isfinite(step.loss))
        return std::nullopt;
    const std::string text =
        line(step, figures(interval_steps_, interval_ms_), interval_loss_ / static_cast<double>(interval_steps_));
    interval_steps_ = 0;
    interval_ms_ = 0.0;
    interval_loss_ = 0.0;
    return text;
}

std::string IterationLog::line(const StepProgress& last, const Figures& interval, double mean_loss) const {
    const int width = static_cast<int>(std::to_string(last.total_steps).size());
    const long long consumed = static_cast<long long>(last.step + 1) * global_batch_;
    char mfu[32] = "unknown (--peak-tflops)";
    if (interval.mfu) std::snprintf(mfu, sizeof mfu, "%.2f %%", 100.0 * *interval.mfu);
    char text[640];
    // Megatron's fields, names and order, so that scripts reading its logs read these (a
    // language model's loss is its "lm loss"); parbench never skips an update (it has no fp16
    // loss scaler), so the skipped count is 0; a NaN loss or grad norm is counted and, for the
    // loss, ends the run.
    std::snprintf(text, sizeof text,
                  " [%s] iteration %*d/%d%s | consumed samples: %lld | elapsed time per iteration (ms): %.2f | "
                  "learning rate: %.6E | global batch size: %d | %s: %.6E | grad norm: %.4f | %s: %.1f | "
                  "TFLOP/s per rank: %.4f | MFU: %s | peak memory (MiB): %.1f | number of skipped iterations: 0 | "
                  "number of nan iterations: %d |\n",
                  log_timestamp(std::chrono::system_clock::now()).c_str(), width, last.step + 1, last.total_steps,
                  last.timed ? "" : " (warm-up)", consumed, interval.time_ms, learning_rate_, global_batch_,
                  tokens_ ? "lm loss" : "loss", mean_loss, last.grad_norm, tokens_ ? "tokens/s" : "samples/s",
                  interval.per_second, interval.tflops_per_rank, mfu,
                  static_cast<double>(last.peak_memory_bytes) / 1048576.0, nan_iterations_);
    return text;
}

nlohmann::json IterationLog::step_json(const StepProgress& step) const {
    const Figures own = figures(1, step.time_ms);
    const auto finite = [](double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr); };
    return {{"step", step.step + 1},
            {"timed", step.timed},
            {"timestamp", log_timestamp(std::chrono::system_clock::now())},
            {"consumed_samples", static_cast<long long>(step.step + 1) * global_batch_},
            {"time_ms", step.time_ms},
            {"learning_rate", learning_rate_},
            {"loss", finite(step.loss)},
            {"grad_norm", finite(step.grad_norm)},
            {tokens_ ? "tokens_per_s" : "samples_per_s", own.per_second},
            {"tflops_per_rank", own.tflops_per_rank},
            {"mfu", own.mfu ? nlohmann::json(*own.mfu) : nlohmann::json(nullptr)},
            {"peak_memory_bytes", step.peak_memory_bytes},
            {"skipped_iterations", 0},
            {"nan_iterations", nan_iterations_}};
}

}  // namespace parbench

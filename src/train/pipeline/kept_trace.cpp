#include "train/pipeline/kept_trace.hpp"

#include <algorithm>

#include "core/json_file.hpp"
#include "train/pipeline/pipeline_report.hpp"
#include "train/train_run.hpp"

namespace parbench {

KeptTrace::KeptTrace(std::string path, const TrainPlan& plan, const MeshShape& shape)
    : path_(std::move(path)), plan_(plan), shape_(shape) {}

void KeptTrace::append(const std::vector<std::vector<TimelineEvent>>& step_events_by_rank) {
    if (path_.empty()) return;
    std::lock_guard lock(mutex_);
    if (abandoned_) return;
    events_.resize(std::max(events_.size(), step_events_by_rank.size()));
    for (std::size_t rank = 0; rank < step_events_by_rank.size(); ++rank)
        events_[rank].insert(events_[rank].end(), step_events_by_rank[rank].begin(), step_events_by_rank[rank].end());
    ++steps_;
    const auto started = std::chrono::steady_clock::now();
    constexpr int cost_share = 20;  // rewrites take at most 1/20 of the run
    if (steps_ > 1 && started - last_written_ < cost_share * last_write_took_) return;
    write_locked(RunStatus::partial, std::to_string(steps_) + " of " + std::to_string(plan_.options.steps) +
                                         " timed steps traced (the run is going on, or it ended before the rest)");
    last_written_ = std::chrono::steady_clock::now();
    last_write_took_ = last_written_ - started;
}

int KeptTrace::steps() const {
    std::lock_guard lock(mutex_);
    return steps_;
}

void KeptTrace::write(RunStatus status, const std::string& reason) {
    if (path_.empty()) return;
    std::lock_guard lock(mutex_);
    if (abandoned_) return;
    write_locked(status, reason);
}

void KeptTrace::abandon(const std::string& reason) noexcept {
    try {
        if (path_.empty()) return;
        std::lock_guard lock(mutex_);
        if (abandoned_) return;
        abandoned_ = true;
        if (steps_ > 0) write_locked(RunStatus::partial, reason);
    } catch (...) {
        // The run is ending anyway: a trace that cannot be written is left as it was (absent).
    }
}

void KeptTrace::write_locked(RunStatus status, const std::string& reason) {
    PipelineMeasurements pipeline;
    pipeline.events = events_;
    // A rank without events yet still gets its named row.
    pipeline.events.resize(static_cast<std::size_t>(shape_.world()));
    nlohmann::json trace = pipeline_trace_json(plan_, shape_, pipeline);
    nlohmann::json& about = trace["otherData"];
    set_status(about, status, reason);
    about["timed_steps_traced"] = steps_;
    about["timed_steps"] = plan_.options.steps;
    write_json_atomically(path_, trace);
}

}  // namespace parbench

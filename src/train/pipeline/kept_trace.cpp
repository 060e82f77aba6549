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
    events_.resize(std::max(events_.size(), step_events_by_rank.size()));
    for (std::size_t rank = 0; rank < step_events_by_rank.size(); ++rank)
        events_[rank].insert(events_[rank].end(), step_events_by_rank[rank].begin(), step_events_by_rank[rank].end());
    ++steps_;
}

int KeptTrace::steps() const {
    std::lock_guard lock(mutex_);
    return steps_;
}

void KeptTrace::write(RunStatus status, const std::string& reason) {
    if (path_.empty()) return;
    std::lock_guard lock(mutex_);
    write_locked(status, reason);
}

void KeptTrace::abandon(const std::string& reason) noexcept {
    try {
        if (path_.empty()) return;
        std::lock_guard lock(mutex_);
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

// The --trace file of a pipeline run, kept as the run goes: every rank's events of each
// finished timed step reach world rank 0 after the step (run_training), and are held here,
// so that the trace is written at the end as complete, and also on the way out of a run that
// fails, that the watchdog ends or that a signal stops: then with the steps it has, marked
// partial (or failed) in its otherData, with the reason. Like the JSON report it is also
// rewritten as partial while the run goes, so that a run whose rank 0 is stopped or killed
// (which then writes nothing more) leaves the steps traced before: after a timed step, unless
// the last rewrite took more than a twentieth of the time since it (the file grows with every
// step; this keeps its cost to 5 % of the run at most). The watchdog's and the signal
// watcher's threads call abandon(): every method takes the lock, and none communicates.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "report/kept_report.hpp"
#include "train/mesh.hpp"
#include "train/pipeline/pipeline_executor.hpp"
#include "train/train_options.hpp"

namespace parbench {

class KeptTrace {
  public:
    // An empty path keeps nothing (no --trace, or not world rank 0).
    KeptTrace(std::string path, const TrainPlan& plan, const MeshShape& shape);
    KeptTrace(const KeptTrace&) = delete;
    KeptTrace& operator=(const KeptTrace&) = delete;

    // One more timed step's events, by world rank.
    void append(const std::vector<std::vector<TimelineEvent>>& step_events_by_rank);
    void write(RunStatus status, const std::string& reason = {});
    // write(partial, reason) that never throws, the way out of a hung, failing or stopped run;
    // nothing when no step was traced (there is nothing to keep). The run is ending: later
    // appends and writes are ignored.
    void abandon(const std::string& reason) noexcept;
    int steps() const;

  private:
    void write_locked(RunStatus status, const std::string& reason);

    std::string path_;
    const TrainPlan& plan_;
    MeshShape shape_;
    mutable std::mutex mutex_;
    std::vector<std::vector<TimelineEvent>> events_;
    int steps_ = 0;
    bool abandoned_ = false;
    // When the last rewrite while running ended, and what it took.
    std::chrono::steady_clock::time_point last_written_{};
    std::chrono::steady_clock::duration last_write_took_{};
};

}  // namespace parbench

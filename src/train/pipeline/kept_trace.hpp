// The --trace file of a pipeline run, kept as the run goes: every rank's events of each
// finished timed step reach world rank 0 after the step (run_training), and are held here,
// so that the trace is written at the end as complete, and also on the way out of a run that
// fails or that the watchdog ends: then with the steps it has, marked partial (or failed) in
// its otherData, with the reason. The watchdog's thread calls abandon(): every method takes
// the lock, and none communicates.
#pragma once

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
    // write(partial, reason) that never throws, the way out of a hung or failing run; nothing
    // when no step was traced (there is nothing to keep).
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
};

}  // namespace parbench

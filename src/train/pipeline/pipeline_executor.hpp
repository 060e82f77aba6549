// Runs one pipeline rank's share of a training step: its schedule's action list in order
// (forwards, backwards, weight gradients, and the transfers between neighbouring stages
// over the pipeline group), then the tied-embedding gradient sum between the first and
// last stages, the data-parallel gradient reduction and the optimizer. Every action is
// timed into a timeline, from which the step's bubble is measured and the trace is drawn.
#pragma once

#include <chrono>
#include <map>
#include <vector>

#include "comm/communicator.hpp"
#include "train/memory_ledger.hpp"
#include "train/model.hpp"
#include "train/ops/ops.hpp"
#include "train/pipeline/schedule.hpp"
#include "train/pipeline/schedule_simulation.hpp"
#include "train/scheme.hpp"

namespace parbench {

// What the timeline shows; the first three are compute (F, B, W).
enum class TimelineKind {
    forward,
    backward,
    weight,
    send_activation,
    recv_activation,
    send_gradient,
    recv_gradient,
    embedding_sync,
    gradient_reduce,
    optimizer,
};
inline constexpr int timeline_kind_count = 10;
const char* timeline_kind_name(TimelineKind kind);
const char* timeline_kind_category(TimelineKind kind);  // "compute", "p2p", "collective", "optimizer"

struct TimelineEvent {
    TimelineKind kind = TimelineKind::forward;
    double start_us = 0.0;  // from the run's origin (a barrier before the timed steps)
    double duration_us = 0.0;
    int microbatch = -1;
    int stage = -1;  // virtual stage
    int step = 0;
};

// One step on one rank. Receive waits are idle time (they include the transfer of the data,
// which cannot be told apart from waiting for the sender); send time is the host time in
// sends (blocking) or in issuing and completing isends (non-blocking).
struct PipelineStepStats {
    double compute_ms = 0.0;    // F + B + W
    double pipeline_ms = 0.0;   // from the step's start to this rank's last pipeline action
    double recv_wait_ms = 0.0;
    double send_ms = 0.0;
    std::size_t p2p_bytes = 0;  // sent by this rank
};

class PipelineExecutor {
  public:
    // `origin` is where the timeline's clock starts; events are kept when `record` is set.
    PipelineExecutor(const Schedule& schedule, int pp_rank, P2pMode mode, Model& model, TrainingScheme& scheme,
                     Communicator& pp, Ops& ops, MemoryLedger& ledger);
    // Runs the step from begin_step to the optimizer; `step_start` is the step's clock start.
    PipelineStepStats run_step(int step, float loss_scale, std::chrono::steady_clock::time_point step_start);
    void set_origin(std::chrono::steady_clock::time_point origin) { origin_ = origin; }
    void set_recording(bool on) { recording_ = on; }
    const std::vector<TimelineEvent>& events() const { return events_; }

  private:
    using Clock = std::chrono::steady_clock;
    void compute(const Action& action, float loss_scale);
    void transfer(const Step& step);
    void wait_for_send(const void* buffer);
    void add_event(TimelineKind kind, Clock::time_point start, Clock::time_point end, int microbatch, int stage);
    int stage_of(int chunk) const { return chunk * schedule_.shape.stages + pp_rank_; }
    float* transfer_buffer(const Action& action);
    void sum_shared_gradients();

    const Schedule& schedule_;
    int pp_rank_;
    P2pMode mode_;
    std::vector<Step> steps_;
    Model& model_;
    TrainingScheme& scheme_;
    Communicator& pp_;
    Ops& ops_;
    Buffer shared_scratch_;  // the other stage's share of the tied embedding gradient
    std::map<const void*, Request> sends_in_flight_;
    Clock::time_point origin_;
    bool recording_ = false;
    int step_ = 0;
    PipelineStepStats stats_;
    std::vector<TimelineEvent> events_;
};

}  // namespace parbench

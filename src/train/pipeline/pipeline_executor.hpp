// Runs one pipeline rank's share of a training step: its schedule's action list in order
// (forwards, backwards, weight gradients, and the transfers between neighbouring stages
// over the pipeline group), then the tied-embedding gradient sum between the first and
// last stages, the data-parallel gradient reduction and the optimizer. Every action is
// timed into a timeline, from which the step's bubble is measured and the trace is drawn.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <vector>

#include "comm/communicator.hpp"
#include "core/fiber_pair.hpp"
#include "theory/pipeline/schedule.hpp"
#include "theory/pipeline/schedule_simulation.hpp"
#include "train/memory_ledger.hpp"
#include "train/model.hpp"
#include "train/ops/ops.hpp"
#include "train/schemes/scheme.hpp"

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
    // The part of the time blocked in pipeline-group calls (transfers and the tied-embedding
    // exchange) spent before the peer had issued its side: waiting for a peer that is still
    // computing, which is bubble, not communication (settle_peer_waits).
    double peer_wait_ms = 0.0;
    PassCounts passes;  // the compute passes this rank ran, counted as they run
};

class PipelineExecutor {
  public:
    // `origin` is where the timeline's clock starts; events are kept when `record` is set.
    // `host` is a host-memory communicator over the world (MPI) and `host_rank_of_pp_rank`
    // the pipeline group's ranks in it: settle_peer_waits exchanges timestamps over it.
    // `pair_passes` (--moe-a2a-overlap-1f1b): see compute_pair below.
    PipelineExecutor(const Schedule& schedule, int pp_rank, P2pMode mode, Model& model, TrainingScheme& scheme,
                     Communicator& pp, Ops& ops, MemoryLedger& ledger, Communicator& host,
                     std::vector<int> host_rank_of_pp_rank, bool pair_passes = false);
    // Runs the step from begin_step to the optimizer; `step_start` is the step's clock start.
    PipelineStepStats run_step(int step, float loss_scale, std::chrono::steady_clock::time_point step_start);
    // After run_step, outside the timed region; collective over the pipeline group. Splits
    // each interval this rank was blocked on a transfer at the moment its peer issued the
    // matching call (its send for a receive, its receive for a send; the later of the two
    // for a paired send and receive), on the clock common to the ranks since set_origin:
    // the part before is waiting for a peer still computing, returned in ms (bubble); the
    // rest is communication. Call set_origin after a barrier before the steps it settles.
    double settle_peer_waits();
    void set_origin(std::chrono::steady_clock::time_point origin) { origin_ = origin; }
    void set_recording(bool on) { recording_ = on; }
    const std::vector<TimelineEvent>& events() const { return events_; }

  private:
    using Clock = std::chrono::steady_clock;
    void compute(const Action& action, float loss_scale);
    // compute()'s pass without its timing: the waits for sends, the model's pass, the counts.
    void run_pass(const Action& action, float loss_scale);
    // --moe-a2a-overlap-1f1b. In 1F1B's steady state a rank that is not the last runs F(j) and
    // then B(i), i < j, with only F(j)'s activation send and B(i)'s gradient receive between
    // them: the two passes are independent (which steps pair: theory/pipeline/paired_passes.hpp,
    // the rule plan prices too). Such a group [first, last] of steps_ runs as B(i)'s
    // receive, then F(j) and B(i) on two fibers (core/fiber_pair.hpp) that hand the thread to
    // each other at every MoE exchange they post (Model::set_moe_exchange_switch), F first,
    // F(j)'s send issued by its fiber once F(j) ends. The last stage, whose F(i) feeds its own
    // B(i), runs unpaired. Deadlock-free: a rank's group k waits only for the next rank's group
    // k (the gradient) and the previous rank's group k-1 (the activation, received before it). Collective order:
    // a switch happens only where an MoE exchange is posted, so the order of every rank's calls
    // is a function of the program, and the ranks of each group the passes talk over (ep, tp,
    // dp: one pipeline stage) run the same schedule and the same model, so they issue their
    // collectives, blocking ones between the switches included, in the same order.
    void compute_pair(std::size_t first, std::size_t last, float loss_scale);
    void transfer(const Step& step);
    void wait_for_send(const void* buffer);
    double now_us() const { return std::chrono::duration<double, std::micro>(Clock::now() - origin_).count(); }
    int note_send(int peer, double issued_us);  // this step's index of the message to `peer`
    int note_recv(int peer, double posted_us);  // this step's index of the message from `peer`
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
    struct InFlightSend {
        Request request;
        int peer = -1;
        int index = -1;
    };
    std::map<const void*, InFlightSend> sends_in_flight_;
    // This step's transfers for settle_peer_waits, on the origin's clock: per peer, when this
    // rank issued each send to it and posted each receive from it, in MPI's matching order;
    // and each interval this rank was blocked on a transfer, with the messages it waited for.
    struct BlockedInterval {
        double start_us = 0.0, end_us = 0.0;
        int send_peer = -1, send_index = -1;
        int recv_peer = -1, recv_index = -1;
    };
    std::map<int, std::vector<double>> send_issued_us_;
    std::map<int, std::vector<double>> recv_posted_us_;
    std::vector<BlockedInterval> blocked_;
    Communicator& host_;
    std::vector<int> host_rank_of_pp_rank_;
    Clock::time_point origin_;
    bool recording_ = false;
    int step_ = 0;
    PipelineStepStats stats_;
    std::vector<TimelineEvent> events_;
    // With pair_passes: per step, the end of the paired group it starts or -1 (paired_group_ends,
    // found once: the steps are fixed); empty without pairing.
    std::vector<int> pair_ends_;
    std::optional<FiberPair> fibers_;  // with pair_passes
};

}  // namespace parbench

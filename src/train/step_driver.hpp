// Runs training steps the way the measurement contract says: data staged before the clock
// starts, a barrier, the step (every micro-batch's forward and backward, the gradient
// collectives, the optimizer), a device synchronisation, the clock stops. Per-step times are
// this rank's; the caller takes the maximum over ranks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "device/device.hpp"
#include "train/model.hpp"
#include "train/pipeline/pipeline_executor.hpp"
#include "train/schemes/scheme.hpp"

namespace parbench {

struct StepPlan {
    int global_batch = 1;   // samples per step, over all data-parallel ranks
    int dp_rank = 0;
    int dp_size = 1;
    // Ranks the gradients are averaged over: dp, or dp x cp under context parallelism (whose
    // ranks hold different tokens of the same samples).
    int gradient_group_size = 1;
    int microbatches = 1;
    int rows_per_sample = 1;  // tokens per sequence (GPT), 1 (MLP)
    std::uint64_t data_seed = 0;
    double testing_delay_ms = 0.0;  // this rank sleeps so long in each step, outside communication
    int testing_sample_shift = 0;   // this rank draws its samples so many later (a planted error)
    int local_batch() const { return global_batch / dp_size; }
    int microbatch_size() const { return local_batch() / microbatches; }
};

// One parallel dimension's process group, whose Communicator counts the step's calls.
// "dp", "tp" (which carries sequence parallelism's collectives too), "pp"; under context
// parallelism "cp" (the attention's transfers) and "dp_cp" (the gradient group, in place of
// "dp"). Groups of one rank are left out: they issue nothing.
struct CommGroup {
    std::string dimension;
    Communicator* comm = nullptr;
};

struct StepRecord {
    double time_ms = 0.0;            // this rank
    // Per dimension, this rank: host time with at least one of the group's calls in flight
    // (CommStats::busy_ms), and the exposed part, blocked in the calls (CommCounter), less
    // for pp the waits for a peer that was still computing (settle_peer_waits). Blocked time
    // lies inside its call's flight, so exposed <= comm <= step time per entry. For cp that is
    // the attention's transfers' issue and waits, on the communicator's clock (the attention's
    // own ContextAttentionCounters::wait_ms, timed around the calls, goes in the report beside it).
    std::map<std::string, double> comm_ms;
    std::map<std::string, double> exposed_ms;
    double exposed_comm_ms = 0.0;    // the sum over dimensions
    double blocked_ms = 0.0;         // in every group's calls, peer waits included
    double loss = 0.0;               // this rank's mean over its micro-batches (0 off the last stage)
    // This rank's share of the squared grad norm (TrainingScheme::gradient_square_sum): summed
    // over the world, the model's squared norm.
    double gradient_square_sum = 0.0;
    PipelineStepStats pipeline;      // pipeline runs only
    PassCounts passes;               // the compute passes this rank ran (the executor's with a pipeline)
    std::vector<MoeLayerStats> moe;  // this rank's MoE layers (Model::moe_layers' order)
    // This rank's time outside communication (time_ms - blocked_ms): what the ranks that
    // wait for it wait for.
    double compute_ms() const { return time_ms - blocked_ms; }
};

class StepDriver {
  public:
    // With a pipeline executor the step runs its schedule instead of the micro-batch loop.
    StepDriver(Model& model, TrainingScheme& scheme, Device& device, Communicator& control, const StepPlan& plan,
               std::vector<CommGroup> groups, PipelineExecutor* pipeline = nullptr);
    // Step `step` counts from 0 over warm-up and timed steps alike (data and AdamW's t).
    StepRecord run_step(int step);

  private:
    Model& model_;
    TrainingScheme& scheme_;
    Device& device_;
    Communicator& control_;
    StepPlan plan_;
    std::vector<CommGroup> groups_;
    std::unique_ptr<Timer> timer_;
    PipelineExecutor* pipeline_;
};

}  // namespace parbench

// Runs training steps the way the measurement contract says: data staged before the clock
// starts, a barrier, the step (every micro-batch's forward and backward, the gradient
// collectives, the optimizer), a device synchronisation, the clock stops. Per-step times are
// this rank's; the caller takes the maximum over ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "device/device.hpp"
#include "train/model.hpp"
#include "train/pipeline/pipeline_executor.hpp"
#include "train/scheme.hpp"

namespace parbench {

struct StepPlan {
    int global_batch = 1;   // samples per step, over all data-parallel ranks
    int dp_rank = 0;
    int dp_size = 1;
    int microbatches = 1;
    int rows_per_sample = 1;  // tokens per sequence (GPT), 1 (MLP)
    std::uint64_t data_seed = 0;
    int local_batch() const { return global_batch / dp_size; }
    int microbatch_size() const { return local_batch() / microbatches; }
};

struct StepRecord {
    double time_ms = 0.0;            // this rank
    double exposed_comm_ms = 0.0;    // this rank
    double loss = 0.0;               // this rank's mean over its micro-batches (0 off the last stage)
    PipelineStepStats pipeline;      // pipeline runs only
};

class StepDriver {
  public:
    // With a pipeline executor the step runs its schedule instead of the micro-batch loop.
    StepDriver(Model& model, TrainingScheme& scheme, Device& device, Communicator& control, const StepPlan& plan,
               PipelineExecutor* pipeline = nullptr);
    // Step `step` counts from 0 over warm-up and timed steps alike (data and AdamW's t).
    StepRecord run_step(int step);

  private:
    Model& model_;
    TrainingScheme& scheme_;
    Device& device_;
    Communicator& control_;
    StepPlan plan_;
    std::unique_ptr<Timer> timer_;
    PipelineExecutor* pipeline_;
};

}  // namespace parbench

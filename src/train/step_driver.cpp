#include "train/step_driver.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "core/nvtx.hpp"

namespace parbench {

StepDriver::StepDriver(Model& model, TrainingScheme& scheme, Device& device, Communicator& control,
                       const StepPlan& plan, std::vector<CommGroup> groups, PipelineExecutor* pipeline)
    : model_(model), scheme_(scheme), device_(device), control_(control), plan_(plan), groups_(std::move(groups)),
      timer_(device.make_timer()), pipeline_(pipeline) {}

StepRecord StepDriver::run_step(int step) {
    const int micro = plan_.microbatch_size();
    // Samples of this step: [step * B, (step + 1) * B); this rank takes its contiguous slice.
    const std::uint64_t first =
        static_cast<std::uint64_t>(step) * static_cast<std::uint64_t>(plan_.global_batch) +
        static_cast<std::uint64_t>(plan_.dp_rank) * static_cast<std::uint64_t>(plan_.local_batch()) +
        static_cast<std::uint64_t>(plan_.testing_sample_shift);
    for (int k = 0; k < plan_.microbatches; ++k)
        model_.stage_batch(k, first + static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(micro));
    // The step loss is the mean over every row of the global batch: each row's share.
    const float loss_scale = 1.0f / (static_cast<float>(plan_.global_batch) * static_cast<float>(plan_.rows_per_sample));
    // The gradient group averages its ranks' gradients, so a rank scales by its share times the
    // group's size (dp, or dp x cp).
    const float rank_loss_scale = loss_scale * static_cast<float>(plan_.gradient_group_size);

    device_.synchronize();
    control_.barrier();
    std::vector<CommStats> before;
    for (const CommGroup& group : groups_) before.push_back(group.comm->stats());
    const auto step_start = std::chrono::steady_clock::now();
    timer_->start();
    StepRecord record;
    if (plan_.testing_delay_ms > 0.0)
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(plan_.testing_delay_ms));
    if (pipeline_ != nullptr) {
        NvtxRange step_range("step " + std::to_string(step));
        record.pipeline = pipeline_->run_step(step, rank_loss_scale, step_start);
        record.passes = record.pipeline.passes;
    } else {
        NvtxRange step_range("step " + std::to_string(step));
        scheme_.begin_step(step + 1);
        for (int k = 0; k < plan_.microbatches; ++k) {
            scheme_.begin_microbatch(k);
            {
                NvtxRange range("forward");
                model_.forward(k, scheme_);
            }
            ++record.passes.forward;
            NvtxRange range("backward");
            model_.backward(k, rank_loss_scale, scheme_);
            ++record.passes.input_grad;  // a whole backward: input and weight gradients
            ++record.passes.weight_grad;
        }
        scheme_.end_backward();
        scheme_.optimizer_step(step + 1);  // AdamW's t counts from 1
    }
    // The MoE balancing biases move after the optimizer, inside the step (a collective over
    // dp when they are on).
    record.moe = model_.finish_step();
    timer_->stop();
    record.time_ms = timer_->elapsed_us() / 1000.0;  // waits for the device's stop event
    record.gradient_square_sum = scheme_.gradient_square_sum();
    if (pipeline_ != nullptr) record.pipeline.peer_wait_ms = pipeline_->settle_peer_waits();
    for (std::size_t g = 0; g < groups_.size(); ++g) {
        const CommStats& now = groups_[g].comm->stats();
        const double blocked = now.total_blocked_ms() - before[g].total_blocked_ms();
        // Waiting for a pipeline peer still computing is bubble (pipeline_report.cpp), not
        // communication: only the rest of a transfer's wait is exposed.
        const double peer_wait = groups_[g].dimension == "pp" ? record.pipeline.peer_wait_ms : 0.0;
        record.comm_ms[groups_[g].dimension] = now.busy_ms - before[g].busy_ms;
        record.exposed_ms[groups_[g].dimension] = std::max(0.0, blocked - peer_wait);
        record.exposed_comm_ms += record.exposed_ms[groups_[g].dimension];
        record.blocked_ms += blocked;
    }
    if (!model_.computes_loss()) return record;
    for (int k = 0; k < plan_.microbatches; ++k) record.loss += model_.mean_loss(k);
    record.loss /= plan_.microbatches;
    return record;
}

}  // namespace parbench

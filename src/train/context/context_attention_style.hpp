// The two styles behind ContextAttention, one file each (ring_attention.cpp,
// alltoall_attention.cpp), and what both need: the chunk layout of context_positions(), their
// workspace's parts, a compute timer and a timed wait.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/context/context_attention.hpp"

namespace parbench::detail {

class ContextAttentionStyle {
  public:
    virtual ~ContextAttentionStyle() = default;
    virtual std::size_t saved_floats() const = 0;
    virtual void forward(float* out, float* saved, const float* q, const float* k, const float* v) = 0;
    virtual void backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* saved,
                          const float* q, const float* k, const float* v) = 0;
    ContextAttentionCounters counters;
};

std::unique_ptr<ContextAttentionStyle> make_ring_attention(Communicator& cp, Ops& ops, MemoryLedger& ledger,
                                                           const ContextSplit& split, const GqaShape& local,
                                                           int full_seq_len);
std::unique_ptr<ContextAttentionStyle> make_alltoall_attention(Communicator& cp, Ops& ops, MemoryLedger& ledger,
                                                               const ContextSplit& split, const GqaShape& local,
                                                               int full_seq_len);

// Every rank's chunks of the sequence, by rank of the split's group: where each peer's tokens
// sit in the whole sequence.
std::vector<ContextChunks> chunks_of_every_rank(int full_seq_len, const ContextSplit& split);

// A style's workspace, one ledger allocation sized as the sum of its parts, handed out as
// consecutive parts in the order they are taken. A part past the end means the allocation's
// sum and the parts taken disagree: a bug in the style, refused rather than overrun.
class WorkspaceParts {
  public:
    explicit WorkspaceParts(const Buffer& workspace)
        : next_(workspace.as<float>()), floats_left_(workspace.bytes() / sizeof(float)) {}
    float* take(std::size_t count) {
        if (count > floats_left_)
            throw std::logic_error("context attention workspace: a part of " + std::to_string(count) +
                                   " floats, with " + std::to_string(floats_left_) + " left");
        float* part = next_;
        next_ += count;
        floats_left_ -= count;
        return part;
    }

  private:
    float* next_;
    std::size_t floats_left_;
};

// Adds the time from construction to destruction to `total_ms`. The ops' queue is drained
// first at the end (calls are asynchronous on a GPU), so the time is the math's, not its issue.
class ComputeTimer {
  public:
    ComputeTimer(Ops& ops, double& total_ms) : ops_(ops), total_ms_(total_ms), start_(Clock::now()) {}
    ~ComputeTimer() {
        ops_.synchronize();
        total_ms_ += std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
    }
    ComputeTimer(const ComputeTimer&) = delete;
    ComputeTimer& operator=(const ComputeTimer&) = delete;

  private:
    using Clock = std::chrono::steady_clock;
    Ops& ops_;
    double& total_ms_;
    Clock::time_point start_;
};

// Completes every pending request, adding the time blocked to `wait_ms`.
void wait_all(std::span<Request> requests, double& wait_ms);

}  // namespace parbench::detail

// The loop a --background load runs on its own thread, whatever it runs on: units of work
// enqueued one after another on the load's queue until asked to stop. On a CPU rank the queue is
// the thread itself (a unit is done when enqueue_unit returns); on a GPU it is the load's stream,
// kept at most `depth` units ahead of what has finished, so the stream never holds more work
// than a stop has to wait for.
//
// A load with peers (the second communicator's all-reduce) must run the same number of units on
// every rank, or one rank waits forever in a unit the others never start. Each unit is followed
// by a stop vote, an all-reduce (minimum) of "this rank has been asked to stop" over the load's
// ranks, and the loop ends after the unit whose vote said that every rank had asked. The vote of
// unit k is read after unit k+1 is enqueued, so a GPU stream never idles while the host waits for
// a vote; every rank reads the same votes in the same order, so all stop after the same unit.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>

namespace parbench {

class LoadQueue {
  public:
    virtual ~LoadQueue() = default;
    // Whether the load runs in step with other ranks (then every unit is followed by a vote).
    virtual bool has_peers() const = 0;
    // One unit (a GEMM, a triad pass, an all-reduce) after everything enqueued before it.
    virtual void enqueue_unit() = 0;
    // This rank's vote, combined over the load's ranks into `slot` (a load with peers only).
    virtual void enqueue_vote(bool stopping, int slot) = 0;
    // Marks the queue's current end as `slot`'s, for wait(slot).
    virtual void mark(int slot) = 0;
    // Returns once the queue has passed `slot`'s latest mark.
    virtual void wait(int slot) = 0;
    // After wait(slot): whether the vote in `slot` said that every rank has asked to stop.
    virtual bool all_asked_to_stop(int slot) = 0;
};

// Runs units until `stopping` (a load without peers: after the unit in progress when it was set;
// with peers: after the unit every rank's vote agreed on) and returns how many were enqueued.
// The last ones may still be in flight: the caller drains the queue. depth >= 2.
std::uint64_t run_load_loop(LoadQueue& queue, const std::atomic<bool>& stopping, int depth);

// The thread a load runs on. What its body throws (a CUDA or MPI failure) is kept and rethrown by
// stop() on the thread that asked, where the run's errors are reported, instead of ending the
// process from a thread nobody joins.
class LoadThread {
  public:
    using Body = std::function<void(const std::atomic<bool>& stopping)>;
    LoadThread() = default;
    ~LoadThread();  // stops a running body; what it threw then is dropped
    LoadThread(const LoadThread&) = delete;
    LoadThread& operator=(const LoadThread&) = delete;

    void start(Body body);
    // Sets the flag the body polls, waits for it to return, and rethrows what it threw.
    void stop();

  private:
    std::atomic<bool> stopping_{false};
    std::exception_ptr failure_;
    std::thread thread_;
};

}  // namespace parbench

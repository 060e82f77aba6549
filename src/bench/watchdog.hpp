// Stops a hung run. The harness says what it is doing before each step (enter()); a
// background thread ends the job when the same step has lasted longer than the timeout,
// after printing which rank hung, in which collective, at which size and iteration.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace parbench {

struct Activity {
    const char* phase = "idle";  // "warm-up", "timed", "check", or "idle" (never times out)
    std::string operation;       // e.g. "allreduce"
    std::uint64_t bytes = 0;
    int iteration = 0;
};

std::string describe(const Activity& activity);

class Watchdog {
  public:
    // timeout_s <= 0 disables it. on_timeout must not return (it aborts the job).
    Watchdog(double timeout_s, int rank, std::function<void(const std::string& message)> on_timeout);
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    void enter(Activity activity);
    void idle();

  private:
    void watch();

    double timeout_s_;
    int rank_;
    std::function<void(const std::string&)> on_timeout_;
    std::mutex mutex_;
    std::condition_variable wake_;
    Activity activity_;
    std::uint64_t generation_ = 0;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace parbench

// Stops a hung run and names the rank that hung it. The harness (and train's step loop) says
// what it is doing before each step (enter()); a background thread on every rank sends that
// to rank 0 over the watchdog's own side channel (bench/heartbeat.hpp), and rank 0's thread
// ends the job when no rank has progressed for --timeout seconds, after printing which ranks
// did not arrive (silent: stopped or dead; or behind: still in an earlier activity) and what
// each rank last reported. Should rank 0 itself fall silent, the lowest other rank reports it.
// The threads never call MPI: they end the process with _exit(124), and mpirun ends the rest.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/heartbeat.hpp"

namespace parbench {

struct Activity {
    const char* phase = "idle";  // "warm-up", "timed", "check", "step", ... or "idle" (never times out)
    std::string operation;       // e.g. "allreduce"
    std::uint64_t bytes = 0;
    int iteration = 0;
};

std::string describe(const Activity& activity);

inline constexpr int watchdog_exit_code = 124;  // as timeout(1)

// What rank 0's thread knows of one rank when it looks.
struct RankView {
    int rank = 0;
    std::string host;
    bool silent = false;  // nothing heard for longer than the staleness limit
    bool ended = false;   // its connection closed: the process is gone
    double silent_s = 0.0;
    bool idle = true;
    std::uint64_t progress = 0;
    double age_s = 0.0;  // how long its current activity has lasted, now
    Activity activity;
};

namespace detail {
// The message to end the job with, or nullopt while some rank still progresses: fires when
// at least one responsive rank is busy, and every responsive rank's activity has lasted
// longer than `timeout_s`. Pure, for tests.
std::optional<std::string> diagnose_hang(const std::vector<RankView>& ranks, double timeout_s);
}  // namespace detail

class Watchdog {
  public:
    // timeout_s <= 0 disables it. Without a channel (one rank, or it could not be set up)
    // each rank watches only itself. on_timeout must not return (it ends the process).
    Watchdog(double timeout_s, int rank, std::function<void(const std::string& message)> on_timeout,
             std::unique_ptr<HeartbeatChannel> channel = nullptr, std::vector<std::string> hosts = {});
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    void enter(Activity activity);
    void idle();
    bool enabled() const { return timeout_s_ > 0; }

  private:
    struct Local {
        Activity activity;
        std::uint64_t progress = 0;
        double age_s = 0.0;
    };
    Local snapshot();
    void watch();
    void watch_alone();
    void watch_as_hub();
    void watch_as_peer();
    bool wait_tick();  // false when stopping
    std::string host_of(int rank) const;

    double timeout_s_;
    int rank_;
    std::function<void(const std::string&)> on_timeout_;
    std::unique_ptr<HeartbeatChannel> channel_;
    std::vector<std::string> hosts_;
    std::mutex mutex_;
    std::condition_variable wake_;
    Activity activity_;
    std::uint64_t progress_ = 0;
    std::uint64_t generation_ = 0;
    std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace parbench

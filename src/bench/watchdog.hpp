// Stops a hung run and names the rank that hung it. The harness (and train's step loop) says
// what it is doing before each step (enter()); a background thread on every rank sends that
// to rank 0 over the watchdog's own side channel (bench/heartbeat.hpp), and rank 0's thread
// ends the job when no rank has progressed for --timeout seconds, after printing which ranks
// did not arrive (silent: stopped or dead; or behind: still in an earlier activity) and what
// each rank last reported. Should rank 0 itself fall silent, the lowest other rank reports it.
// The threads never call MPI: they end the process with _exit(124), and mpirun ends the rest.
//
// Inside an activity (a training step) the watchdog can also be told of each communicator
// call (it is a CallObserver): then each rank's report names the call it waits in, by
// dimension, operation, size and peer ("waiting in pp recv from rank 2 (1.5 MiB, call 4 on
// pp in it)"). The calls are noted lock-free and without allocating (a sequence lock over
// atomics); the watchdog's thread turns them into text.
#pragma once

#include <array>
#include <atomic>
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
    std::string call;  // the communicator call it waits in (or made last) in the activity; may be empty
};

namespace detail {
// The message to end the job with, or nullopt while some rank still progresses: fires when
// at least one responsive rank is busy, and every responsive rank's activity has lasted
// longer than `timeout_s`. Pure, for tests.
std::optional<std::string> diagnose_hang(const std::vector<RankView>& ranks, double timeout_s);
}  // namespace detail

namespace detail {
// A communicator call as the watchdog describes it: `channel` names the communicator ("pp")
// and maps its ranks to world ranks. "waiting in pp recv from rank 2 (1.5 MiB, call 4 on pp
// in it)"; once returned, "last call: ...". Pure, for tests.
std::string describe_call(const std::string& channel, const std::vector<int>& world_ranks,
                          const CallObserver::Call& call, std::uint32_t index, bool inside);
}  // namespace detail

// Progress lines for long points: when one point (operation and size) has run `interval_s`
// seconds, and every interval_s after, `print` gets "progress: allreduce (size 1073741824 B,
// timed iteration 12); this point has run 30 s". Written by the watchdog's thread, which
// reads what the timed loop already tells it, so the timed window pays nothing more.
struct ProgressLines {
    double interval_s = 0.0;  // <= 0: none
    std::function<void(const std::string& line)> print;
};

class Watchdog : public CallObserver {
  public:
    // timeout_s <= 0 disables the timeout. Without a channel (one rank, or it could not be set
    // up) each rank watches only itself. on_timeout must not return (it ends the process).
    // The thread runs when either the timeout or the progress lines are on.
    Watchdog(double timeout_s, int rank, std::function<void(const std::string& message)> on_timeout,
             std::unique_ptr<HeartbeatChannel> channel = nullptr, std::vector<std::string> hosts = {},
             ProgressLines progress = {});
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    void enter(Activity activity);
    // The next iteration of the current activity, without a lock or a clock read: the timed
    // loop calls it between barrier-synchronised calls, where the peers do nothing, and work
    // there lengthens the timed call (docs/collectives.md, Measurement method). The watchdog's thread sees
    // it at its next tick, so the age counts from then, a tick (0.1 s at most) late.
    void advance(int iteration) noexcept;
    void idle();
    bool enabled() const { return timeout_s_ > 0; }
    // Watching at all: the timeout, or progress lines (enter() and advance() count either way).
    bool watching() const { return timeout_s_ > 0 || progress_lines_.interval_s > 0; }

    // CallObserver: up to max_channels communicators; the calls come on the thread that
    // calls enter() (they are counted per activity).
    static constexpr int max_channels = 8;
    int add_channel(const std::string& name, const std::vector<int>& world_ranks) override;
    void call_started(int channel, const Call& call) noexcept override;
    void call_ended(int channel) noexcept override;

  private:
    struct Local {
        Activity activity;
        std::uint64_t progress = 0;
        double age_s = 0.0;
        std::string call;
    };
    // The call the main thread is in (or made last), written by it and read by the watchdog's
    // thread under a sequence lock: odd while a write is under way. Every field is atomic, so a
    // torn read is retried, never undefined.
    struct CallSlot {
        std::atomic<std::uint32_t> sequence{0};
        std::atomic<int> channel{-1};  // -1: no call yet in this activity
        std::atomic<const char*> op{""};
        std::atomic<std::uint64_t> bytes{0};
        std::atomic<int> to{-1};
        std::atomic<int> from{-1};
        std::atomic<bool> wait{false};
        std::atomic<bool> inside{false};
        std::atomic<std::uint32_t> index{0};
    };
    struct Channel {
        std::string name;
        std::vector<int> world_ranks;
    };
    void write_call(int channel, const Call& call, std::uint32_t index, bool inside) noexcept;
    // A new activity or iteration: no call in it yet.
    void forget_calls() noexcept;
    std::string read_call();  // under mutex_ (the channels' names)
    Local snapshot();
    void watch();
    void watch_alone();
    void watch_as_hub();
    void watch_as_peer();
    bool wait_tick();  // false when stopping
    void report_progress(const Local& local);  // on the watchdog's thread, at each tick
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
    std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
    // advance(): written by the calling thread alone, read by the watchdog's.
    std::atomic<int> iteration_{0};
    std::atomic<std::uint64_t> advances_{0};
    // The watchdog's thread's own: the advances it last saw and when it first saw them.
    std::uint64_t seen_advances_ = 0;
    std::chrono::steady_clock::time_point seen_at_{};
    std::vector<Channel> channels_;  // guarded by mutex_
    CallSlot call_;
    // Calls per channel in the current activity: written by the calling thread only.
    std::array<std::atomic<std::uint32_t>, max_channels> calls_in_activity_{};
    ProgressLines progress_lines_;
    // The watchdog's thread's own: the point it last saw measured, since when, and the last line.
    std::string progress_point_;
    std::chrono::steady_clock::time_point progress_point_since_{};
    std::chrono::steady_clock::time_point progress_printed_{};
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace parbench

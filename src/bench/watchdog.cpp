#include "bench/watchdog.hpp"

#include <chrono>
#include <sstream>

namespace parbench {

std::string describe(const Activity& activity) {
    std::ostringstream text;
    text << activity.operation << " (size " << activity.bytes << " B, " << activity.phase << " iteration "
         << activity.iteration << ")";
    return text.str();
}

Watchdog::Watchdog(double timeout_s, int rank, std::function<void(const std::string&)> on_timeout)
    : timeout_s_(timeout_s), rank_(rank), on_timeout_(std::move(on_timeout)) {
    if (timeout_s_ > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Watchdog::enter(Activity activity) {
    if (timeout_s_ <= 0) return;
    std::lock_guard lock(mutex_);
    activity_ = std::move(activity);
    ++generation_;
}

void Watchdog::idle() { enter(Activity{}); }

void Watchdog::watch() {
    using Clock = std::chrono::steady_clock;
    const auto timeout = std::chrono::duration<double>(timeout_s_);
    const auto poll = std::chrono::duration<double>(timeout_s_ < 1.0 ? timeout_s_ / 4 : 0.25);
    std::unique_lock lock(mutex_);
    std::uint64_t seen = generation_;
    auto since = Clock::now();
    while (!stopping_) {
        wake_.wait_for(lock, poll);
        if (stopping_) break;
        if (generation_ != seen) {
            seen = generation_;
            since = Clock::now();
            continue;
        }
        if (std::string_view(activity_.phase) == "idle" || Clock::now() - since < timeout) continue;
        std::ostringstream message;
        message << "rank " << rank_ << " timed out after " << timeout_s_ << " s in " << describe(activity_)
                << ": a rank is stuck or dead; raise --timeout if the operation is only slow";
        on_timeout_(message.str());
        return;
    }
}

}  // namespace parbench

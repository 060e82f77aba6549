#include "bench/load_loop.hpp"

#include <stdexcept>
#include <utility>

namespace parbench {

std::uint64_t run_load_loop(LoadQueue& queue, const std::atomic<bool>& stopping, int depth) {
    if (depth < 2) throw std::logic_error("run_load_loop: depth must be at least 2 (a vote is read one unit late)");
    const bool peers = queue.has_peers();
    for (std::uint64_t unit = 0;; ++unit) {
        const int slot = static_cast<int>(unit % static_cast<std::uint64_t>(depth));
        // The unit that last used this slot has finished before another is enqueued in its place.
        if (unit >= static_cast<std::uint64_t>(depth)) queue.wait(slot);
        queue.enqueue_unit();
        if (!peers) {
            queue.mark(slot);
            if (stopping) return unit + 1;
            continue;
        }
        queue.enqueue_vote(stopping, slot);
        queue.mark(slot);
        if (unit == 0) continue;
        const int previous = static_cast<int>((unit - 1) % static_cast<std::uint64_t>(depth));
        queue.wait(previous);
        if (queue.all_asked_to_stop(previous)) return unit + 1;
    }
}

LoadThread::~LoadThread() {
    if (!thread_.joinable()) return;
    stopping_ = true;
    thread_.join();
}

void LoadThread::start(Body body) {
    if (thread_.joinable()) throw std::logic_error("LoadThread::start: the load is running already");
    stopping_ = false;
    failure_ = nullptr;
    thread_ = std::thread([this, body = std::move(body)] {
        try {
            body(stopping_);
        } catch (...) {
            failure_ = std::current_exception();
        }
    });
}

void LoadThread::stop() {
    if (!thread_.joinable()) throw std::logic_error("LoadThread::stop: the load is not running");
    stopping_ = true;
    thread_.join();
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

}  // namespace parbench

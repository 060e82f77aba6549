#include "bench/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "core/memory_budget.hpp"

namespace parbench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point then) { return std::chrono::duration<double>(Clock::now() - then).count(); }

std::string seconds_text(double seconds) {
    std::ostringstream text;
    text << std::fixed << std::setprecision(1) << seconds << " s";
    return text.str();
}

std::string silence_text(bool ended, double silent_s) {
    if (ended) return " ended (its process is gone)";
    std::ostringstream text;
    text << " stopped answering " << seconds_text(silent_s) << " ago (stopped or dead)";
    return text.str();
}

std::string rank_name(const RankView& view) {
    return "rank " + std::to_string(view.rank) + (view.host.empty() ? "" : " (" + view.host + ")");
}

// The activity and, when known, the call in it: "train step (timed iteration 3), waiting in ...".
std::string activity_text(const Activity& activity, const std::string& call) {
    return describe(activity) + (call.empty() ? "" : ", " + call);
}

// The state of one rank as the others read it: "in allreduce (size 8 B, timed iteration 3) for 5.2 s".
std::string last_report(const RankView& view) {
    std::string text = view.idle ? "idle" : "in " + activity_text(view.activity, view.call);
    if (view.ended) return text + ", then its process ended";
    if (view.silent) return text + ", then silent for " + seconds_text(view.silent_s);
    return text + " for " + seconds_text(view.age_s);
}

HeartbeatRecord to_record(int rank, const Activity& activity, std::uint64_t progress, double age_s,
                          const std::string& call) {
    HeartbeatRecord record;
    record.rank = rank;
    record.idle = std::string_view(activity.phase) == "idle" ? 1 : 0;
    record.progress = progress;
    record.bytes = activity.bytes;
    record.iteration = activity.iteration;
    record.age_s = age_s;
    std::strncpy(record.phase, activity.phase, sizeof record.phase - 1);
    std::strncpy(record.operation, activity.operation.c_str(), sizeof record.operation - 1);
    std::strncpy(record.call, call.c_str(), sizeof record.call - 1);
    return record;
}

// A phase name must outlive the record it came from: received ones are kept here.
const char* interned_phase(const char* phase) {
    for (const char* known : {"warm-up", "timed", "check", "step", "setup", "results", "idle"})
        if (std::strncmp(phase, known, 23) == 0) return known;
    return "busy";
}

}  // namespace

std::string describe(const Activity& activity) {
    std::ostringstream text;
    text << activity.operation << " (";
    if (activity.bytes > 0) text << "size " << activity.bytes << " B, ";
    text << activity.phase << " iteration " << activity.iteration << ")";
    return text.str();
}

namespace detail {

std::string describe_call(const std::string& channel, const std::vector<int>& world_ranks,
                          const CallObserver::Call& call, std::uint32_t index, bool inside) {
    auto world = [&](int rank) {
        return rank >= 0 && static_cast<std::size_t>(rank) < world_ranks.size() ? world_ranks[static_cast<std::size_t>(rank)]
                                                                                : rank;
    };
    std::ostringstream text;
    text << (inside ? (call.wait ? "waiting on a non-blocking " : "waiting in ") : "last call: ") << channel << ' '
         << call.op;
    if (call.to >= 0) text << " to rank " << world(call.to);
    if (call.from >= 0) text << (call.to >= 0 ? ", from rank " : " from rank ") << world(call.from);
    text << " (";
    if (call.bytes >= 1024)
        text << memory_text(static_cast<double>(call.bytes)) << ", ";
    else if (call.bytes > 0)
        text << call.bytes << " B, ";
    text << "call " << index << " on " << channel << " in it)";
    if (!inside) text << ", returned";
    return text.str();
}

std::optional<std::string> diagnose_hang(const std::vector<RankView>& ranks, double timeout_s) {
    // A rank whose process just ended is mpirun's to report: it ends the job within moments.
    constexpr double launcher_grace_s = 5.0;
    for (const RankView& view : ranks)
        if (view.ended && view.silent_s < launcher_grace_s) return std::nullopt;
    bool any_busy = false;
    for (const RankView& view : ranks) {
        if (view.silent || view.ended) continue;
        if (view.age_s <= timeout_s) return std::nullopt;  // it progressed within the timeout
        any_busy = any_busy || !view.idle;
    }
    if (!any_busy) return std::nullopt;

    // The activity the furthest responsive rank waits in.
    const RankView* ahead = nullptr;
    for (const RankView& view : ranks)
        if (!view.silent && !view.ended && !view.idle && (!ahead || view.progress > ahead->progress)) ahead = &view;
    std::vector<std::string> culprits;
    for (const RankView& view : ranks)
        if (view.silent || view.ended)
            culprits.push_back(rank_name(view) + silence_text(view.ended, view.silent_s));
    if (culprits.empty())
        for (const RankView& view : ranks)
            if (view.progress < ahead->progress)
                culprits.push_back(rank_name(view) + " did not reach it (still " + last_report(view) + ")");

    std::ostringstream text;
    text << "watchdog: timed out after " << timeout_s << " s (--timeout) in " << activity_text(ahead->activity, ahead->call)
         << ": ";
    if (culprits.empty()) {
        text << "no rank is behind: every rank is inside it (a stall inside the operation, or it is only slow)";
    } else {
        for (std::size_t i = 0; i < culprits.size(); ++i) text << (i ? "; " : "") << culprits[i];
    }
    text << ". Last reports: ";
    constexpr std::size_t listed = 8;
    for (std::size_t i = 0; i < ranks.size() && i < listed; ++i)
        text << (i ? "; " : "") << rank_name(ranks[i]) << " " << last_report(ranks[i]);
    if (ranks.size() > listed) text << "; and " << ranks.size() - listed << " more";
    text << ". Raise --timeout if the operation is only slow";
    return text.str();
}

}  // namespace detail

Watchdog::Watchdog(double timeout_s, int rank, std::function<void(const std::string&)> on_timeout,
                   std::unique_ptr<HeartbeatChannel> channel, std::vector<std::string> hosts, ProgressLines progress)
    : timeout_s_(timeout_s), rank_(rank), on_timeout_(std::move(on_timeout)), channel_(std::move(channel)),
      hosts_(std::move(hosts)), progress_lines_(std::move(progress)) {
    if (watching()) thread_ = std::thread([this] { watch(); });
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
    if (!watching()) return;
    std::lock_guard lock(mutex_);
    if (std::string_view(activity.phase) != "idle") ++progress_;
    iteration_.store(activity.iteration, std::memory_order_relaxed);
    activity_ = std::move(activity);
    since_ = Clock::now();
    // Calls are counted and shown per activity (when any communicator is observed).
    if (!channels_.empty()) forget_calls();
}

void Watchdog::advance(int iteration) noexcept {
    if (!watching()) return;
    iteration_.store(iteration, std::memory_order_relaxed);
    advances_.store(advances_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    forget_calls();  // as enter(): the calls are counted per iteration
}

void Watchdog::forget_calls() noexcept {
    for (auto& count : calls_in_activity_) count.store(0, std::memory_order_relaxed);
    write_call(-1, Call{}, 0, false);
}

void Watchdog::idle() { enter(Activity{}); }

int Watchdog::add_channel(const std::string& name, const std::vector<int>& world_ranks) {
    std::lock_guard lock(mutex_);
    if (channels_.size() >= static_cast<std::size_t>(max_channels))
        throw std::logic_error("Watchdog::add_channel: more than " + std::to_string(max_channels) + " communicators");
    channels_.push_back(Channel{name, world_ranks});
    return static_cast<int>(channels_.size()) - 1;
}

// Writer side of the sequence lock: only the thread that makes the calls writes.
void Watchdog::write_call(int channel, const Call& call, std::uint32_t index, bool inside) noexcept {
    const std::uint32_t sequence = call_.sequence.load(std::memory_order_relaxed);
    call_.sequence.store(sequence + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    call_.channel.store(channel, std::memory_order_relaxed);
    call_.op.store(call.op, std::memory_order_relaxed);
    call_.bytes.store(call.bytes, std::memory_order_relaxed);
    call_.to.store(call.to, std::memory_order_relaxed);
    call_.from.store(call.from, std::memory_order_relaxed);
    call_.wait.store(call.wait, std::memory_order_relaxed);
    call_.inside.store(inside, std::memory_order_relaxed);
    call_.index.store(index, std::memory_order_relaxed);
    call_.sequence.store(sequence + 2, std::memory_order_release);
}

void Watchdog::call_started(int channel, const Call& call) noexcept {
    if (timeout_s_ <= 0 || channel < 0 || channel >= max_channels) return;
    auto& count = calls_in_activity_[static_cast<std::size_t>(channel)];
    const std::uint32_t index = count.load(std::memory_order_relaxed) + 1;
    count.store(index, std::memory_order_relaxed);
    write_call(channel, call, index, true);
}

void Watchdog::call_ended(int channel) noexcept {
    if (timeout_s_ <= 0 || channel < 0 || channel >= max_channels) return;
    // Only `inside` changes: the rest describes the call just made.
    const std::uint32_t sequence = call_.sequence.load(std::memory_order_relaxed);
    call_.sequence.store(sequence + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    call_.inside.store(false, std::memory_order_relaxed);
    call_.sequence.store(sequence + 2, std::memory_order_release);
}

// Reader side: retries while a write is under way; the writer never stops inside one for
// long (a stopped process stops this thread too), so a few tries suffice.
std::string Watchdog::read_call() {
    for (int attempt = 0; attempt < 1000; ++attempt) {
        const std::uint32_t before = call_.sequence.load(std::memory_order_acquire);
        if (before % 2 == 1) continue;
        const int channel = call_.channel.load(std::memory_order_relaxed);
        Call call;
        call.op = call_.op.load(std::memory_order_relaxed);
        call.bytes = call_.bytes.load(std::memory_order_relaxed);
        call.to = call_.to.load(std::memory_order_relaxed);
        call.from = call_.from.load(std::memory_order_relaxed);
        call.wait = call_.wait.load(std::memory_order_relaxed);
        const bool inside = call_.inside.load(std::memory_order_relaxed);
        const std::uint32_t index = call_.index.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (call_.sequence.load(std::memory_order_relaxed) != before) continue;
        if (channel < 0 || static_cast<std::size_t>(channel) >= channels_.size()) return {};
        const Channel& named = channels_[static_cast<std::size_t>(channel)];
        return detail::describe_call(named.name, named.world_ranks, call, index, inside);
    }
    return {};
}

Watchdog::Local Watchdog::snapshot() {
    std::lock_guard lock(mutex_);
    const std::uint64_t advances = advances_.load(std::memory_order_relaxed);
    if (advances != seen_advances_) {
        seen_advances_ = advances;
        seen_at_ = Clock::now();
    }
    Activity activity = activity_;
    activity.iteration = iteration_.load(std::memory_order_relaxed);
    return {activity, progress_ + advances, seconds_since(std::max(since_, seen_at_)), read_call()};
}

bool Watchdog::wait_tick() {
    // Progress lines alone need no finer tick than a second.
    const auto tick = std::chrono::duration<double>(timeout_s_ > 0 ? std::min(0.1, timeout_s_ / 4) : 1.0);
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, tick, [this] { return stopping_; });
    return !stopping_;
}

std::string Watchdog::host_of(int rank) const {
    return static_cast<std::size_t>(rank) < hosts_.size() ? hosts_[static_cast<std::size_t>(rank)] : std::string();
}

void Watchdog::report_progress(const Local& local) {
    if (progress_lines_.interval_s <= 0 || !progress_lines_.print) return;
    const std::string_view phase = local.activity.phase;
    // A point is its warm-up and timed iterations; its check and the gathering of its times
    // belong to it, so only those two phases start a new one.
    if (phase == "warm-up" || phase == "timed") {
        const std::string point = local.activity.operation + '\x1f' + std::to_string(local.activity.bytes);
        if (point != progress_point_) {
            progress_point_ = point;
            progress_point_since_ = progress_printed_ = Clock::now();
        }
    }
    if (phase == "idle" || progress_point_.empty() || seconds_since(progress_printed_) < progress_lines_.interval_s) return;
    progress_printed_ = Clock::now();
    progress_lines_.print("progress: " + describe(local.activity) + "; this point has run " +
                    std::to_string(static_cast<long long>(seconds_since(progress_point_since_))) + " s");
}

void Watchdog::watch() {
    if (!channel_)
        watch_alone();
    else if (channel_->is_hub())
        watch_as_hub();
    else
        watch_as_peer();
}

// Without a side channel a rank can only say that it waited too long itself.
void Watchdog::watch_alone() {
    while (wait_tick()) {
        const Local local = snapshot();
        report_progress(local);
        if (timeout_s_ <= 0 || std::string_view(local.activity.phase) == "idle" || local.age_s < timeout_s_) continue;
        std::ostringstream message;
        message << "watchdog: rank " << rank_ << " timed out after " << timeout_s_ << " s in "
                << activity_text(local.activity, local.call)
                << ": a rank is stuck or dead (which one is unknown: this run has no watchdog side channel); raise "
                   "--timeout if the operation is only slow";
        on_timeout_(message.str());
        return;
    }
}

namespace {
constexpr double beat_interval_s = 0.25;
// Silent this long: the rank is not running (SIGSTOP, a dead host, a swapped-out process).
double staleness_limit(double timeout_s) { return std::clamp(timeout_s / 2, 1.0, 3.0); }
}  // namespace

void Watchdog::watch_as_hub() {
    const int size = channel_->size();
    std::vector<Inbox> inboxes(static_cast<std::size_t>(size));
    std::vector<HeartbeatRecord> last(static_cast<std::size_t>(size));
    std::vector<Clock::time_point> heard(static_cast<std::size_t>(size), Clock::now());
    auto last_beat = Clock::now() - std::chrono::seconds(1);
    const char beat = 1;
    while (wait_tick()) {
        for (int r = 1; r < size; ++r) {
            const int fd = channel_->peers()[static_cast<std::size_t>(r)].fd();
            for (const HeartbeatRecord& record : inboxes[static_cast<std::size_t>(r)].read_records(fd)) {
                last[static_cast<std::size_t>(r)] = record;
                heard[static_cast<std::size_t>(r)] = Clock::now();
            }
        }
        if (seconds_since(last_beat) >= beat_interval_s) {
            for (int r = 1; r < size; ++r) send_nowait(channel_->peers()[static_cast<std::size_t>(r)].fd(), &beat, 1);
            last_beat = Clock::now();
        }
        const Local local = snapshot();
        report_progress(local);
        std::vector<RankView> views;
        for (int r = 0; r < size; ++r) {
            RankView view;
            view.rank = r;
            view.host = host_of(r);
            if (r == 0) {
                view.idle = std::string_view(local.activity.phase) == "idle";
                view.progress = local.progress;
                view.age_s = local.age_s;
                view.activity = local.activity;
                view.call = local.call;
            } else {
                const HeartbeatRecord& record = last[static_cast<std::size_t>(r)];
                view.silent_s = seconds_since(heard[static_cast<std::size_t>(r)]);
                view.ended = inboxes[static_cast<std::size_t>(r)].closed;
                view.silent = view.silent_s > staleness_limit(timeout_s_);
                view.idle = record.idle != 0;
                view.progress = record.progress;
                view.age_s = record.age_s + view.silent_s;
                view.activity = Activity{interned_phase(record.phase), record.operation, record.bytes,
                                         static_cast<int>(record.iteration)};
                view.call = std::string(record.call, strnlen(record.call, sizeof record.call));
            }
            views.push_back(std::move(view));
        }
        if (auto message = detail::diagnose_hang(views, timeout_s_)) {
            on_timeout_(*message);
            return;
        }
    }
}

// Sends its state to rank 0; reports rank 0 itself only when rank 0 falls silent while this
// rank waits. Ranks wait half a second per rank above 1 before reporting, so the lowest
// responsive rank speaks first and mpirun ends the others before they repeat it.
void Watchdog::watch_as_peer() {
    Inbox from_hub;
    auto hub_heard = Clock::now();
    auto last_sent = Clock::now() - std::chrono::seconds(1);
    bool hub_lost_before = false;
    auto hub_lost_since = Clock::now();
    const int fd = channel_->hub().fd();
    while (wait_tick()) {
        const Local local = snapshot();
        if (seconds_since(last_sent) >= beat_interval_s) {
            const HeartbeatRecord record = to_record(rank_, local.activity, local.progress, local.age_s, local.call);
            send_nowait(fd, &record, sizeof record);
            last_sent = Clock::now();
        }
        if (from_hub.drain(fd)) hub_heard = Clock::now();
        const double hub_silent_s = seconds_since(hub_heard);
        // A closed connection means rank 0's process ended: it reported the hang itself, or mpirun
        // reports its death and ends the job; either way this rank has nothing to add.
        const bool hub_lost = !from_hub.closed && hub_silent_s > staleness_limit(timeout_s_);
        const bool waiting = std::string_view(local.activity.phase) != "idle" && local.age_s > timeout_s_;
        if (!(hub_lost && waiting)) {
            hub_lost_before = false;
            continue;
        }
        if (!hub_lost_before) hub_lost_since = Clock::now();
        hub_lost_before = true;
        if (seconds_since(hub_lost_since) < 0.5 * (rank_ - 1)) continue;
        RankView hub;
        hub.rank = 0;
        hub.host = host_of(0);
        std::ostringstream message;
        message << "watchdog: timed out after " << timeout_s_ << " s (--timeout) in "
                << activity_text(local.activity, local.call)
                << ": " << rank_name(hub)
                << silence_text(false, hub_silent_s) << ". Reported by rank " << rank_;
        if (!host_of(rank_).empty()) message << " (" << host_of(rank_) << ")";
        message << ", in it for " << seconds_text(local.age_s) << ". Raise --timeout if the operation is only slow";
        on_timeout_(message.str());
        return;
    }
}

}  // namespace parbench

#include "bench/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <sstream>

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

// The state of one rank as the others read it: "in allreduce (size 8 B, timed iteration 3) for 5.2 s".
std::string last_report(const RankView& view) {
    std::string text = view.idle ? "idle" : "in " + describe(view.activity);
    if (view.ended) return text + ", then its process ended";
    if (view.silent) return text + ", then silent for " + seconds_text(view.silent_s);
    return text + " for " + seconds_text(view.age_s);
}

HeartbeatRecord to_record(int rank, const Activity& activity, std::uint64_t progress, double age_s) {
    HeartbeatRecord record;
    record.rank = rank;
    record.idle = std::string_view(activity.phase) == "idle" ? 1 : 0;
    record.progress = progress;
    record.bytes = activity.bytes;
    record.iteration = activity.iteration;
    record.age_s = age_s;
    std::strncpy(record.phase, activity.phase, sizeof record.phase - 1);
    std::strncpy(record.operation, activity.operation.c_str(), sizeof record.operation - 1);
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
    text << "watchdog: timed out after " << timeout_s << " s (--timeout) in " << describe(ahead->activity) << ": ";
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
                   std::unique_ptr<HeartbeatChannel> channel, std::vector<std::string> hosts)
    : timeout_s_(timeout_s), rank_(rank), on_timeout_(std::move(on_timeout)), channel_(std::move(channel)),
      hosts_(std::move(hosts)) {
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
    if (std::string_view(activity.phase) != "idle") ++progress_;
    activity_ = std::move(activity);
    ++generation_;
    since_ = Clock::now();
}

void Watchdog::idle() { enter(Activity{}); }

Watchdog::Local Watchdog::snapshot() {
    std::lock_guard lock(mutex_);
    return {activity_, progress_, seconds_since(since_)};
}

bool Watchdog::wait_tick() {
    const auto tick = std::chrono::duration<double>(std::min(0.1, timeout_s_ / 4));
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, tick, [this] { return stopping_; });
    return !stopping_;
}

std::string Watchdog::host_of(int rank) const {
    return static_cast<std::size_t>(rank) < hosts_.size() ? hosts_[static_cast<std::size_t>(rank)] : std::string();
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
        if (std::string_view(local.activity.phase) == "idle" || local.age_s < timeout_s_) continue;
        std::ostringstream message;
        message << "watchdog: rank " << rank_ << " timed out after " << timeout_s_ << " s in "
                << describe(local.activity)
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
            const HeartbeatRecord record = to_record(rank_, local.activity, local.progress, local.age_s);
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
        message << "watchdog: timed out after " << timeout_s_ << " s (--timeout) in " << describe(local.activity)
                << ": " << rank_name(hub)
                << silence_text(false, hub_silent_s) << ". Reported by rank " << rank_;
        if (!host_of(rank_).empty()) message << " (" << host_of(rank_) << ")";
        message << ", in it for " << seconds_text(local.age_s) << ". Raise --timeout if the operation is only slow";
        on_timeout_(message.str());
        return;
    }
}

}  // namespace parbench

#include "comm/communicator.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/nvtx.hpp"

namespace parbench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Records one call on scope exit, and names it for Nsight Systems. Only a counted call is
// named: the collective harness pauses counting and names each timed iteration itself, and
// a range push and pop (12 ns with no tool attached, parbench-call-path-cost) inside its
// timed window would be a twentieth of an 8-byte call.
class CountedCall {
  public:
    CountedCall(CommStats& stats, const char* op, std::size_t bytes)
        : stats_(stats), op_(op), bytes_(bytes), counting_(stats.enabled),
          start_(counting_ ? Clock::now() : Clock::time_point{}) {
        if (!counting_) return;
        range_.emplace(op);
        stats_.call_started(start_);
    }
    ~CountedCall() {
        if (!counting_) return;
        const auto end = Clock::now();
        stats_.call_ended(end);
        const double ms = std::chrono::duration<double, std::milli>(end - start_).count();
        stats_.record(op_, bytes_, ms, ms);
    }
    CountedCall(const CountedCall&) = delete;
    CountedCall& operator=(const CountedCall&) = delete;

  private:
    CommStats& stats_;
    const char* op_;
    std::size_t bytes_;
    std::optional<NvtxRange> range_;
    bool counting_;
    Clock::time_point start_;
};

std::size_t bytes_of(std::size_t count, DType type) { return count * dtype_size(type); }

// alltoallv's arguments checked (blocking and non-blocking alike), and its byte count:
// nccl-tests' convention again, the larger of the two buffers, here the larger total.
std::size_t checked_alltoallv_bytes(const void* send, std::span<const std::size_t> send_counts,
                                    std::span<const std::size_t> send_offsets, const void* recv,
                                    std::span<const std::size_t> recv_counts,
                                    std::span<const std::size_t> recv_offsets, DType type, int ranks) {
    const auto n = static_cast<std::size_t>(ranks);
    if (send_counts.size() != n || send_offsets.size() != n || recv_counts.size() != n || recv_offsets.size() != n)
        throw std::invalid_argument("alltoallv: counts and offsets need one entry per rank (" + std::to_string(n) + ")");
    if (send == recv) throw std::invalid_argument("alltoallv: in place is not supported; give two buffers");
    const std::size_t sent = std::accumulate(send_counts.begin(), send_counts.end(), std::size_t{0});
    const std::size_t received = std::accumulate(recv_counts.begin(), recv_counts.end(), std::size_t{0});
    return bytes_of(std::max(sent, received), type);
}

// Issues a non-blocking call, named for Nsight Systems, and has the request count itself
// when it completes (Request::count_in).
template <class Issue>
Request counted_request(CommStats& stats, const char* op, std::size_t bytes, Issue issue) {
    NvtxRange range(op);
    if (!stats.enabled) return issue();
    const auto start = Clock::now();
    stats.call_started(start);
    Request request = issue();
    request.count_in(stats, op, bytes, start, ms_since(start));
    return request;
}

class RepeatedIssue final : public PreparedCall {
  public:
    explicit RepeatedIssue(std::function<void()> issue) : issue_(std::move(issue)) {}
    void run() override { issue_(); }

  private:
    std::function<void()> issue_;
};

}  // namespace

std::unique_ptr<PreparedCall> Communicator::prepare(std::function<void()> issue) {
    return std::make_unique<RepeatedIssue>(std::move(issue));
}

// Tells a communicator's observer, if it has one, that a blocking call runs for the scope.
// Declared before the CountedCall of the same call, so the observer's work stays outside
// the call's timing.
class ObservedCall {
  public:
    ObservedCall(const Communicator& comm, const char* op, std::size_t bytes, int to = -1, int from = -1)
        : observer_(comm.observer_), channel_(comm.observer_channel_) {
        if (observer_) observer_->call_started(channel_, CallObserver::Call{op, bytes, to, from, false});
    }
    ~ObservedCall() {
        if (observer_) observer_->call_ended(channel_);
    }
    ObservedCall(const ObservedCall&) = delete;
    ObservedCall& operator=(const ObservedCall&) = delete;

  private:
    CallObserver* observer_;
    int channel_;
};

CallObservation& CallObservation::operator=(CallObservation&& other) noexcept {
    if (this != &other) {
        stop();
        comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
}

CallObservation::~CallObservation() { stop(); }

void CallObservation::stop() noexcept {
    if (comm_ == nullptr) return;
    comm_->observer_ = nullptr;
    comm_ = nullptr;
}

CallObservation Communicator::observe_calls(CallObserver& observer, const std::string& name,
                                            const std::vector<int>& world_ranks) {
    observer_channel_ = observer.add_channel(name, world_ranks);
    observer_ = &observer;
    return CallObservation(this);
}

Request Communicator::observed_request(Request request, const CallObserver::Call& call) {
    if (observer_ && request.pending()) request.observe_in(observer_, observer_channel_, call);
    return request;
}

Request::~Request() { wait(); }

void Request::wait() {
    if (!impl_) return;
    if (observer_) observer_->call_started(channel_, call_);
    const auto start = Clock::now();
    impl_->wait();
    const auto now = Clock::now();
    if (observer_) observer_->call_ended(channel_);
    accounting_.blocked_ms += std::chrono::duration<double, std::milli>(now - start).count();
    complete(now);
}

bool Request::test() {
    if (!impl_) return true;
    const auto start = Clock::now();
    const bool done = impl_->test();
    const auto now = Clock::now();
    accounting_.blocked_ms += std::chrono::duration<double, std::milli>(now - start).count();
    if (!done) return false;
    complete(now);
    return true;
}

void Request::count_in(CommStats& stats, const char* op, std::size_t bytes, Clock::time_point issued, double issue_ms) {
    accounting_ = Accounting{&stats, op, bytes, issued, issue_ms};
    if (!impl_) complete(issued + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double, std::milli>(issue_ms)));
}

void Request::complete(Clock::time_point now) {
    impl_.reset();
    if (accounting_.stats == nullptr) return;
    accounting_.stats->call_ended(now);
    accounting_.stats->record(accounting_.op, accounting_.bytes,
                              std::chrono::duration<double, std::milli>(now - accounting_.issued).count(),
                              accounting_.blocked_ms);
    accounting_.stats = nullptr;
}

void CommStats::record(const std::string& op, std::size_t bytes, double time_ms, double blocked_ms) {
    CommCounter& counter = by_op[op];
    ++counter.calls;
    counter.bytes += bytes;
    counter.time_ms += time_ms;
    counter.blocked_ms += blocked_ms;
}

void CommStats::call_started(Clock::time_point at) {
    if (in_flight_++ == 0) busy_since_ = at;
}

void CommStats::call_ended(Clock::time_point at) {
    if (in_flight_ == 0) return;
    if (--in_flight_ == 0) busy_ms += std::chrono::duration<double, std::milli>(at - busy_since_).count();
}

double CommStats::total_blocked_ms() const {
    double ms = 0.0;
    for (const auto& [op, counter] : by_op) ms += counter.blocked_ms;
    return ms;
}

// Byte counts follow nccl-tests: the larger of the two buffers of the call.
void Communicator::allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) {
    ObservedCall observed(*this, "allreduce", bytes_of(count, type));
    CountedCall call(stats_, "allreduce", bytes_of(count, type));
    do_allreduce(send, recv, count, type, op);
}
void Communicator::allgather(const void* send, void* recv, std::size_t send_count, DType type) {
    ObservedCall observed(*this, "allgather", bytes_of(send_count * size(), type));
    CountedCall call(stats_, "allgather", bytes_of(send_count * size(), type));
    do_allgather(send, recv, send_count, type);
}
void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type, ReduceOp op) {
    ObservedCall observed(*this, "reducescatter", bytes_of(recv_count * size(), type));
    CountedCall call(stats_, "reducescatter", bytes_of(recv_count * size(), type));
    do_reduce_scatter(send, recv, recv_count, type, op);
}
void Communicator::broadcast(const void* send, void* recv, std::size_t count, DType type, int root) {
    ObservedCall observed(*this, "broadcast", bytes_of(count, type), -1, root);
    CountedCall call(stats_, "broadcast", bytes_of(count, type));
    do_broadcast(send, recv, count, type, root);
}
void Communicator::reduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op, int root) {
    ObservedCall observed(*this, "reduce", bytes_of(count, type), root);
    CountedCall call(stats_, "reduce", bytes_of(count, type));
    do_reduce(send, recv, count, type, op, root);
}
void Communicator::alltoall(const void* send, void* recv, std::size_t count_per_peer, DType type) {
    ObservedCall observed(*this, "alltoall", bytes_of(count_per_peer * size(), type));
    CountedCall call(stats_, "alltoall", bytes_of(count_per_peer * size(), type));
    do_alltoall(send, recv, count_per_peer, type);
}
void Communicator::alltoallv(const void* send, std::span<const std::size_t> send_counts,
                             std::span<const std::size_t> send_offsets, void* recv,
                             std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_offsets,
                             DType type) {
    const std::size_t bytes = checked_alltoallv_bytes(send, send_counts, send_offsets, recv, recv_counts, recv_offsets,
                                                      type, size());
    ObservedCall observed(*this, "alltoallv", bytes);
    CountedCall call(stats_, "alltoallv", bytes);
    do_alltoallv(send, send_counts, send_offsets, recv, recv_counts, recv_offsets, type);
}
void Communicator::gather(const void* send, void* recv, std::size_t send_count, DType type, int root) {
    ObservedCall observed(*this, "gather", bytes_of(send_count * size(), type), root);
    CountedCall call(stats_, "gather", bytes_of(send_count * size(), type));
    do_gather(send, recv, send_count, type, root);
}
void Communicator::scatter(const void* send, void* recv, std::size_t recv_count, DType type, int root) {
    ObservedCall observed(*this, "scatter", bytes_of(recv_count * size(), type), -1, root);
    CountedCall call(stats_, "scatter", bytes_of(recv_count * size(), type));
    do_scatter(send, recv, recv_count, type, root);
}
void Communicator::send(const void* buffer, std::size_t count, DType type, int peer) {
    ObservedCall observed(*this, "send", bytes_of(count, type), peer);
    CountedCall call(stats_, "send", bytes_of(count, type));
    do_send(buffer, count, type, peer);
}
void Communicator::recv(void* buffer, std::size_t count, DType type, int peer) {
    ObservedCall observed(*this, "recv", bytes_of(count, type), -1, peer);
    CountedCall call(stats_, "recv", bytes_of(count, type));
    do_recv(buffer, count, type, peer);
}
void Communicator::sendrecv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count,
                            DType type) {
    ObservedCall observed(*this, "sendrecv", bytes_of(count, type), send_peer, recv_peer);
    CountedCall call(stats_, "sendrecv", bytes_of(count, type));
    do_sendrecv(send, send_peer, recv, recv_peer, count, type);
}
void Communicator::barrier() {
    ObservedCall observed(*this, "barrier", 0);
    NvtxRange range("barrier");
    do_barrier();
}

Request Communicator::iallreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) {
    return observed_request(counted_request(stats_, "allreduce", bytes_of(count, type),
                                            [&] { return do_iallreduce(send, recv, count, type, op); }),
                            {"allreduce", bytes_of(count, type)});
}
Request Communicator::iallgather(const void* send, void* recv, std::size_t send_count, DType type) {
    return observed_request(counted_request(stats_, "allgather", bytes_of(send_count * size(), type),
                                            [&] { return do_iallgather(send, recv, send_count, type); }),
                            {"allgather", bytes_of(send_count * size(), type)});
}
Request Communicator::ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                      ReduceOp op) {
    return observed_request(counted_request(stats_, "reducescatter", bytes_of(recv_count * size(), type),
                                            [&] { return do_ireduce_scatter(send, recv, recv_count, type, op); }),
                            {"reducescatter", bytes_of(recv_count * size(), type)});
}
Request Communicator::isend(const void* buffer, std::size_t count, DType type, int peer) {
    return observed_request(counted_request(stats_, "send", bytes_of(count, type),
                                            [&] { return do_isend(buffer, count, type, peer); }),
                            {"send", bytes_of(count, type), peer});
}
Request Communicator::irecv(void* buffer, std::size_t count, DType type, int peer) {
    return observed_request(counted_request(stats_, "recv", bytes_of(count, type),
                                            [&] { return do_irecv(buffer, count, type, peer); }),
                            {"recv", bytes_of(count, type), -1, peer});
}
Request Communicator::ialltoallv(const void* send, std::span<const std::size_t> send_counts,
                                 std::span<const std::size_t> send_offsets, void* recv,
                                 std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_offsets,
                                 DType type) {
    const std::size_t bytes = checked_alltoallv_bytes(send, send_counts, send_offsets, recv, recv_counts, recv_offsets,
                                                      type, size());
    return observed_request(counted_request(stats_, "alltoallv", bytes,
                                            [&] {
                                                return do_ialltoallv(send, send_counts, send_offsets, recv,
                                                                     recv_counts, recv_offsets, type);
                                            }),
                            {"alltoallv", bytes});
}

}  // namespace parbench

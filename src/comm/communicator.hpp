// The one interface every collective and every parallel training scheme talks to. Buffers
// are device pointers of the backend's device (host memory for MPI, GPU memory for NCCL).
// Semantics follow NCCL: counts are elements, a call is in place when the send pointer
// is the receive pointer (or, for allgather / reducescatter / gather, the rank's slice of
// it), and broadcast takes both a send and a receive buffer.
//
// Every public call is counted (calls, bytes, time, blocked time) in the communicator's
// CommStats, which is how training reports split traffic and exposed communication by
// parallel dimension: a training step's exposed communication on a group is the growth of
// its stats' blocked time, so every scheme is covered by construction. The public methods
// are the counting wrappers; backends implement the do_* hooks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.hpp"

namespace parbench {

struct CommStats;
class Communicator;

// Told on the calling thread when a blocking call of a Communicator, or a wait() on one of its
// Requests, starts and ends: how the --timeout watchdog says which dimension's call each rank
// of a training step waits in. The calls come outside what CommStats times, around every call,
// small messages included, so an observer must be cheap: no allocation, no lock, no throw, no
// call back into the communicator.
class CallObserver {
  public:
    struct Call {
        const char* op = "";  // as CommStats names it: "allreduce", "send", "recv", ..., "barrier"
        std::uint64_t bytes = 0;
        int to = -1;          // send, sendrecv: the destination, a rank of the communicator
        int from = -1;        // recv, sendrecv: the source
        bool wait = false;    // a wait() on a request issued earlier
    };
    // Once per communicator, before its calls come (Communicator::observe_calls): what it is
    // called ("tp") and the world rank of each of its ranks. Returns the channel its calls
    // arrive on.
    virtual int add_channel(const std::string& name, const std::vector<int>& world_ranks) = 0;
    virtual void call_started(int channel, const Call& call) noexcept = 0;
    virtual void call_ended(int channel) noexcept = 0;

  protected:
    ~CallObserver() = default;
};

// While it lives, a communicator's calls go to an observer (Communicator::observe_calls).
class CallObservation {
  public:
    CallObservation() = default;
    explicit CallObservation(Communicator* comm) : comm_(comm) {}
    CallObservation(CallObservation&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
    CallObservation& operator=(CallObservation&& other) noexcept;
    ~CallObservation();
    CallObservation(const CallObservation&) = delete;
    CallObservation& operator=(const CallObservation&) = delete;

  private:
    void stop() noexcept;
    Communicator* comm_ = nullptr;
};

// A non-blocking operation in flight. wait() completes it; test() polls. A request issued by
// a Communicator's public method is counted when it completes (in wait(), a test() that
// returns true, or the destructor): its time runs from the issue to that moment, its
// blocked time is the issue plus every wait() and test() on it.
class Request {
  public:
    class Impl {
      public:
        virtual ~Impl() = default;
        virtual void wait() = 0;
        virtual bool test() = 0;
    };
    Request() = default;
    explicit Request(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
    Request(Request&&) noexcept = default;
    Request& operator=(Request&&) noexcept = default;
    ~Request();  // waits: an abandoned request would leave its buffers in use
    void wait();
    bool test();
    bool pending() const { return impl_ != nullptr; }
    // Counts this request in `stats` as `op` when it completes; `issue_ms` is the time its
    // issue took. Called by the Communicator that issued it.
    void count_in(CommStats& stats, const char* op, std::size_t bytes, std::chrono::steady_clock::time_point issued,
                  double issue_ms);
    // Tells `observer` when wait() blocks on this request (its destructor's wait included).
    // Called by the Communicator that issued it, when its calls are observed.
    void observe_in(CallObserver* observer, int channel, CallObserver::Call call) {
        observer_ = observer;
        channel_ = channel;
        call_ = call;
        call_.wait = true;
    }

  private:
    void complete(std::chrono::steady_clock::time_point now);

    struct Accounting {
        CommStats* stats = nullptr;  // null: not counted
        const char* op = "";
        std::size_t bytes = 0;
        std::chrono::steady_clock::time_point issued;
        double blocked_ms = 0.0;
    };
    std::unique_ptr<Impl> impl_;
    Accounting accounting_;
    CallObserver* observer_ = nullptr;  // null: waits are not observed
    int channel_ = 0;
    CallObserver::Call call_;
};

// Blocking calls with their arguments decided once, for a timing loop
// (Communicator::prepare): run() repeats exactly those calls.
class PreparedCall {
  public:
    virtual ~PreparedCall() = default;
    virtual void run() = 0;
};

struct CommCounter {
    std::size_t calls = 0;
    std::size_t bytes = 0;     // payload bytes of the calls, nccl-tests' size convention
    // Host time from each call's start to its completion: a blocking call's duration; for a
    // non-blocking one, from its issue to the wait() or test() that saw it complete (an
    // upper bound on its transfer, since the host notices completion only when it asks).
    double time_ms = 0.0;
    // The part of time_ms the host was blocked in the calls: a blocking call's whole
    // duration; a non-blocking one's issue plus its waits and tests. What overlaps compute
    // is not in it, so blocked_ms <= time_ms for every call.
    double blocked_ms = 0.0;
};

// Per-collective counters: keys are "allreduce", "allgather", ..., "send", "recv".
struct CommStats {
    std::map<std::string, CommCounter> by_op;
    // The collective harness times calls itself and turns counting off around them, so
    // that two clock reads and a map update per call stay out of small-message timings.
    bool enabled = true;
    // Host time during which at least one counted call was in flight (from a blocking call's
    // start, or a non-blocking one's issue, to its completion): the union of the calls' time,
    // so it never exceeds the wall time that passed, however many calls overlap.
    double busy_ms = 0.0;
    void record(const std::string& op, std::size_t bytes, double time_ms, double blocked_ms);
    void call_started(std::chrono::steady_clock::time_point at);
    void call_ended(std::chrono::steady_clock::time_point at);
    void reset() {
        by_op.clear();
        busy_ms = 0.0;
    }
    double total_blocked_ms() const;  // over every op

  private:
    int in_flight_ = 0;
    std::chrono::steady_clock::time_point busy_since_;
};

// Turns a communicator's counting off for a scope, and back to what it was afterwards.
class PausedCounting {
  public:
    explicit PausedCounting(CommStats& stats) : stats_(stats), was_enabled_(stats.enabled) { stats_.enabled = false; }
    ~PausedCounting() { stats_.enabled = was_enabled_; }
    PausedCounting(const PausedCounting&) = delete;
    PausedCounting& operator=(const PausedCounting&) = delete;

  private:
    CommStats& stats_;
    bool was_enabled_;
};

class Communicator {
  public:
    virtual ~Communicator() = default;
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::string_view backend() const = 0;  // "mpi" or "nccl"

    void allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op);
    // send: count elements; recv: count * size() elements, rank r's block at r * count.
    void allgather(const void* send, void* recv, std::size_t send_count, DType type);
    // send: recv_count * size() elements; recv: this rank's reduced block of recv_count.
    void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type, ReduceOp op);
    void broadcast(const void* send, void* recv, std::size_t count, DType type, int root);
    void reduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op, int root);
    // send and recv: count_per_peer * size() elements; block q goes to / comes from rank q.
    void alltoall(const void* send, void* recv, std::size_t count_per_peer, DType type);
    // Blocks of any size, one entry per rank (elements): send_counts[q] elements at
    // send_offsets[q] go to rank q; recv_counts[q] at recv_offsets[q] come from rank q, and
    // must be what rank q sends here. Out of place only (send and recv distinct buffers).
    void alltoallv(const void* send, std::span<const std::size_t> send_counts,
                   std::span<const std::size_t> send_offsets, void* recv, std::span<const std::size_t> recv_counts,
                   std::span<const std::size_t> recv_offsets, DType type);
    // recv (root only): send_count * size() elements.
    void gather(const void* send, void* recv, std::size_t send_count, DType type, int root);
    // send (root only): recv_count * size() elements.
    void scatter(const void* send, void* recv, std::size_t recv_count, DType type, int root);
    void send(const void* buffer, std::size_t count, DType type, int peer);
    void recv(void* buffer, std::size_t count, DType type, int peer);
    // Sends to one peer and receives from another at once (a ring step needs no ordering).
    void sendrecv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count, DType type);
    void barrier();

    Request iallreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op);
    Request iallgather(const void* send, void* recv, std::size_t send_count, DType type);
    Request ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type, ReduceOp op);
    Request isend(const void* buffer, std::size_t count, DType type, int peer);
    Request irecv(void* buffer, std::size_t count, DType type, int peer);
    // alltoallv's arguments; the counts and offsets are copied (the caller's may go at once),
    // the buffers must stay untouched until the request completes. MPI: MPI_Ialltoallv, which
    // Open MPI progresses only inside MPI calls (poll with test() while computing, or it moves
    // when waited for). NCCL: grouped sends and receives on the side stream, see
    // nccl_communicator.hpp for when the data may be read.
    Request ialltoallv(const void* send, std::span<const std::size_t> send_counts,
                       std::span<const std::size_t> send_offsets, void* recv, std::span<const std::size_t> recv_counts,
                       std::span<const std::size_t> recv_offsets, DType type);

    // Ranks with the same color form a new communicator, ordered by key (MPI_Comm_split,
    // ncclCommSplit). Collective over this communicator.
    virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

    // Ends every process of the job now; used by the watchdog on a hang.
    [[noreturn]] virtual void abort(int exit_code) = 0;

    // Waits until the calls issued so far have completed on the device (no-op on CPU).
    virtual void synchronize() {}

    // What the collective harness times: `issue` makes blocking calls of this communicator,
    // and the result repeats them. A backend may take every decision about their arguments
    // now and repeat only its own calls (no counting, no observer, no dispatch), so that a
    // timed window holds what the peers' benchmarks time: the MPI backend does. The default
    // repeats `issue` itself. Valid while this communicator and the buffers `issue` names live.
    virtual std::unique_ptr<PreparedCall> prepare(std::function<void()> issue);

    // Checks the arguments of the blocking calls `issue` makes without making them, so that a
    // call the library cannot take is refused before its buffers exist: `issue` may name
    // buffers never allocated, which are neither read nor written. MPI refuses counts and
    // displacements past its int range (UsageError naming the call); the default checks
    // nothing (NCCL's counts are size_t).
    virtual void check_arguments(const std::function<void()>& issue) { (void)issue; }

    CommStats& stats() { return stats_; }
    const CommStats& stats() const { return stats_; }

    // Tells `observer` about every blocking call and every wait on a request issued here,
    // under the name `name` (world_ranks: this communicator's ranks' world ranks), until the
    // returned observation ends. One observer at a time; requests issued while observed tell
    // it of their waits, so they must complete before the observer goes.
    [[nodiscard]] CallObservation observe_calls(CallObserver& observer, const std::string& name,
                                                const std::vector<int>& world_ranks);

  protected:
    Communicator() = default;

    virtual void do_allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) = 0;
    virtual void do_allgather(const void* send, void* recv, std::size_t send_count, DType type) = 0;
    virtual void do_reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                   ReduceOp op) = 0;
    virtual void do_broadcast(const void* send, void* recv, std::size_t count, DType type, int root) = 0;
    virtual void do_reduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op, int root) = 0;
    virtual void do_alltoall(const void* send, void* recv, std::size_t count_per_peer, DType type) = 0;
    virtual void do_alltoallv(const void* send, std::span<const std::size_t> send_counts,
                              std::span<const std::size_t> send_offsets, void* recv,
                              std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_offsets,
                              DType type) = 0;
    virtual void do_gather(const void* send, void* recv, std::size_t send_count, DType type, int root) = 0;
    virtual void do_scatter(const void* send, void* recv, std::size_t recv_count, DType type, int root) = 0;
    virtual void do_send(const void* buffer, std::size_t count, DType type, int peer) = 0;
    virtual void do_recv(void* buffer, std::size_t count, DType type, int peer) = 0;
    virtual void do_sendrecv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count,
                             DType type) = 0;
    virtual void do_barrier() = 0;
    virtual Request do_iallreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) = 0;
    virtual Request do_iallgather(const void* send, void* recv, std::size_t send_count, DType type) = 0;
    virtual Request do_ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                       ReduceOp op) = 0;
    virtual Request do_isend(const void* buffer, std::size_t count, DType type, int peer) = 0;
    virtual Request do_irecv(void* buffer, std::size_t count, DType type, int peer) = 0;
    virtual Request do_ialltoallv(const void* send, std::span<const std::size_t> send_counts,
                                  std::span<const std::size_t> send_offsets, void* recv,
                                  std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_offsets,
                                  DType type) = 0;

  private:
    friend class CallObservation;
    friend class ObservedCall;
    // `request` tells the observer of its waits, when there is one.
    Request observed_request(Request request, const CallObserver::Call& call);

    CommStats stats_;
    CallObserver* observer_ = nullptr;
    int observer_channel_ = 0;
};

}  // namespace parbench

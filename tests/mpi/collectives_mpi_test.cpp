// Every collective, every dtype and op that applies, in place and out of place, at sizes
// that divide unevenly into chunks, validated element by element on real MPI. Launched by
// CTest under mpirun with 1, 2, 3 and 4 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/collective_harness.hpp"
#include "bench/watchdog.hpp"
#include "collectives/collective.hpp"
#include "comm/mpi_communicator.hpp"
#include "device/cpu_device.hpp"
#include "tests/support/mpi_gtest_main.hpp"

namespace parbench {
namespace {

struct World {
    std::unique_ptr<MpiCommunicator> data = MpiCommunicator::world();
    std::unique_ptr<MpiCommunicator> control = MpiCommunicator::world();
    CpuDevice device;
    Watchdog watchdog{0.0, 0, [](const std::string&) {}};
};

World* world = nullptr;

std::uint64_t wrong_elements(const Collective& collective, std::size_t count, const CollectiveParams& params,
                             bool inplace) {
    TimingOptions timing;
    timing.warmup = 1;
    timing.iters = 2;
    CollectiveHarness harness(*world->data, *world->control, world->device, timing, world->watchdog);
    PointSpec spec{&collective, count, params, inplace, true};
    const PointMeasurement measurement = harness.measure(spec);
    EXPECT_EQ(measurement.times.iterations, 2);
    EXPECT_EQ(measurement.times.ranks, world->data->size());
    EXPECT_EQ(measurement.times.own_us.size(), 2u * static_cast<std::size_t>(world->data->size()));
    return measurement.wrong.value();
}

std::uint64_t wrong_elements(const Collective& collective, std::size_t count, DType type, ReduceOp op, int root,
                             bool inplace) {
    return wrong_elements(collective, count, CollectiveParams{type, op, root}, inplace);
}

// Counts that are odd multiples of the rank count, so per-rank slices are uneven sizes.
std::size_t count_for(const Collective& collective, int nranks, std::size_t per_rank) {
    return per_rank * collective.count_multiple(nranks);
}

TEST(CollectivesOverMpi, EveryDtypeAndOpInAndOutOfPlace) {
    const int nranks = world->data->size();
    for (const Collective* collective : all_collectives()) {
        for (DType type : all_dtypes()) {
            for (ReduceOp op : all_reduce_ops()) {
                if (!collective->reducing() && op != ReduceOp::sum) continue;
                if (collective->reducing() && reduce_op_unsupported_reason(op, type)) continue;
                for (bool inplace : {false, true}) {
                    if (inplace && !collective->supports_inplace()) continue;
                    for (std::size_t per_rank : {1u, 7u, 1001u}) {
                        const std::size_t count = count_for(*collective, nranks, per_rank);
                        const int root = collective->rooted() ? nranks - 1 : 0;
                        EXPECT_EQ(wrong_elements(*collective, count, type, op, root, inplace), 0u)
                            << collective->name() << ' ' << dtype_name(type) << ' ' << reduce_op_name(op)
                            << (inplace ? " in-place" : " out-of-place") << " count " << count << " ranks "
                            << nranks;
                    }
                }
            }
        }
    }
}

TEST(CollectivesOverMpi, EveryRootOfRootedCollectives) {
    const int nranks = world->data->size();
    for (const Collective* collective : all_collectives()) {
        if (!collective->rooted()) continue;
        for (int root = 0; root < nranks; ++root)
            for (bool inplace : {false, true})
                EXPECT_EQ(wrong_elements(*collective, count_for(*collective, nranks, 33), DType::int32,
                                         ReduceOp::max, root, inplace),
                          0u)
                    << collective->name() << " root " << root;
    }
}

// alltoallv under every form of --skew, two seeds (two popularity orders), at counts below,
// near and above the rank count (so empty blocks too), dispatch and its transpose the combine,
// through the harness as the CLI runs it.
TEST(CollectivesOverMpi, AlltoallvEverySkew) {
    const int nranks = world->data->size();
    const Collective& alltoallv = *find_collective("alltoallv");
    for (const std::string& text : {std::string("uniform"), std::string("zipf:0.8"), std::string("zipf:1.5"),
                                   std::string("zipf:40"), std::string("hot:1"), "hot:" + std::to_string(nranks)})
        for (std::uint64_t seed : {1u, 7u})
            for (DType type : {DType::float32, DType::int8, DType::float64})
                for (std::size_t count : {1u, 7u, 1001u})
                    for (ExchangeDirection direction : {ExchangeDirection::dispatch, ExchangeDirection::combine}) {
                        const CollectiveParams params{type, ReduceOp::sum, 0, parse_skew(text, seed), direction};
                        EXPECT_EQ(wrong_elements(alltoallv, count, params, false), 0u)
                            << text << " seed " << seed << ' ' << dtype_name(type) << " count " << count << " ranks "
                            << nranks << ' ' << direction_name(direction);
                    }
}

// A matrix whose rows all differ (skew's rows are alike), with empty blocks and blocks out of
// order in the buffer: rank s sends (s + 2d) % 3 + s % 2 elements to rank d, placed in reverse
// rank order, each element naming s, d and its index.
struct AnyMatrix {
    static std::size_t block(int s, int d) { return static_cast<std::size_t>((s + 2 * d) % 3 + s % 2); }
    static std::int32_t value(int s, int d, std::size_t i) { return static_cast<std::int32_t>(s * 10000 + d * 100 + i); }
    AnyMatrix(int n, int me) : n(n), me(me) {
        const auto un = static_cast<std::size_t>(n);
        send_counts.resize(un);
        send_offsets.resize(un);
        recv_counts.resize(un);
        recv_offsets.resize(un);
        for (int d = n - 1; d >= 0; --d) {  // blocks in reverse rank order in the send buffer
            send_counts[static_cast<std::size_t>(d)] = block(me, d);
            send_offsets[static_cast<std::size_t>(d)] = sent;
            sent += block(me, d);
        }
        for (int s = 0; s < n; ++s) {
            recv_counts[static_cast<std::size_t>(s)] = block(s, me);
            recv_offsets[static_cast<std::size_t>(s)] = received;
            received += block(s, me);
        }
        send.assign(sent + 1, 0);  // +1: never empty
        recv.assign(received + 1, -1);
        for (int d = 0; d < n; ++d)
            for (std::size_t i = 0; i < block(me, d); ++i)
                send[send_offsets[static_cast<std::size_t>(d)] + i] = value(me, d, i);
    }
    void expect_received() const {
        for (int s = 0; s < n; ++s)
            for (std::size_t i = 0; i < block(s, me); ++i)
                EXPECT_EQ(recv[recv_offsets[static_cast<std::size_t>(s)] + i], value(s, me, i)) << "from " << s << " " << i;
        EXPECT_EQ(recv[received], -1) << "wrote past its blocks";
    }
    int n, me;
    std::vector<std::size_t> send_counts, send_offsets, recv_counts, recv_offsets;
    std::size_t sent = 0, received = 0;
    std::vector<std::int32_t> send, recv;
};

TEST(CollectivesOverMpi, AlltoallvMovesAnyMatrix) {
    Communicator& comm = *world->data;
    comm.stats().reset();
    AnyMatrix m(comm.size(), comm.rank());
    const auto un = static_cast<std::size_t>(comm.size());
    comm.alltoallv(m.send.data(), m.send_counts, m.send_offsets, m.recv.data(), m.recv_counts, m.recv_offsets,
                   DType::int32);
    m.expect_received();
    const CommCounter& counted = comm.stats().by_op.at("alltoallv");
    EXPECT_EQ(counted.calls, 1u);
    EXPECT_EQ(counted.bytes, std::max(m.sent, m.received) * sizeof(std::int32_t));
    // One entry per rank, and two buffers: anything else is a caller's bug, refused.
    EXPECT_THROW(comm.alltoallv(m.send.data(), std::span(m.send_counts).first(un - 1), m.send_offsets, m.recv.data(),
                                m.recv_counts, m.recv_offsets, DType::int32),
                 std::invalid_argument);
    EXPECT_THROW(comm.alltoallv(m.send.data(), m.send_counts, m.send_offsets, m.send.data(), m.recv_counts,
                                m.recv_offsets, DType::int32),
                 std::invalid_argument);
}

// ialltoallv moves the same matrix: two in flight at once (the MoE overlap issues a layer's two
// halves together), the caller's counts gone before completion (the request keeps its copy),
// completed by polling test() for one and wait() for the other, each counted once with its
// blocked time within its time.
TEST(CollectivesOverMpi, NonBlockingAlltoallvMovesAnyMatrix) {
    Communicator& comm = *world->data;
    comm.stats().reset();
    AnyMatrix first(comm.size(), comm.rank()), second(comm.size(), comm.rank());
    Request polled, waited;
    {
        AnyMatrix arguments(comm.size(), comm.rank());  // counts and offsets that go before completion
        polled = comm.ialltoallv(first.send.data(), arguments.send_counts, arguments.send_offsets, first.recv.data(),
                                 arguments.recv_counts, arguments.recv_offsets, DType::int32);
        waited = comm.ialltoallv(second.send.data(), arguments.send_counts, arguments.send_offsets,
                                 second.recv.data(), arguments.recv_counts, arguments.recv_offsets, DType::int32);
        arguments.send_counts.assign(arguments.send_counts.size(), 1u << 20);
        arguments.recv_offsets.assign(arguments.recv_offsets.size(), 1u << 20);
    }
    while (!polled.test()) {
    }
    EXPECT_FALSE(polled.pending());
    waited.wait();
    first.expect_received();
    second.expect_received();
    const CommCounter& counted = comm.stats().by_op.at("alltoallv");
    EXPECT_EQ(counted.calls, 2u);
    EXPECT_EQ(counted.bytes, 2 * std::max(first.sent, first.received) * sizeof(std::int32_t));
    EXPECT_LE(counted.blocked_ms, counted.time_ms);
    EXPECT_THROW(comm.ialltoallv(first.send.data(), first.send_counts, first.send_offsets, first.send.data(),
                                 first.recv_counts, first.recv_offsets, DType::int32),
                 std::invalid_argument);
}

TEST(CollectivesOverMpi, NonBlockingFormsMatchBlocking) {
    Communicator& comm = *world->data;
    comm.stats().reset();
    const int n = comm.size();
    std::vector<float> send(6 * static_cast<std::size_t>(n)), recv(send.size()), gathered(send.size());
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(comm.rank() + i);
    comm.iallreduce(send.data(), recv.data(), send.size(), DType::float32, ReduceOp::avg).wait();
    for (std::size_t i = 0; i < send.size(); ++i) EXPECT_FLOAT_EQ(recv[i], (n - 1) / 2.0f + i);
    Request gather = comm.iallgather(send.data(), gathered.data(), 6, DType::float32);
    gather.wait();
    for (int r = 0; r < n; ++r) EXPECT_FLOAT_EQ(gathered[static_cast<std::size_t>(r) * 6 + 1], r + 1.0f);
    std::vector<float> shard(6);
    comm.ireduce_scatter(send.data(), shard.data(), 6, DType::float32, ReduceOp::sum).wait();
    const float rank_sum = n * (n - 1) / 2.0f;
    EXPECT_FLOAT_EQ(shard[0], rank_sum + n * static_cast<float>(6 * comm.rank()));
    if (n > 1) {
        const int next = (comm.rank() + 1) % n, previous = (comm.rank() + n - 1) % n;
        float out = static_cast<float>(comm.rank()), in = -1.0f;
        Request receive = comm.irecv(&in, 1, DType::float32, previous);
        Request sent = comm.isend(&out, 1, DType::float32, next);
        receive.wait();
        sent.wait();
        EXPECT_FLOAT_EQ(in, static_cast<float>(previous));
    }
    EXPECT_EQ(comm.stats().by_op.at("allreduce").calls, 1u);
}

// What the harness times: preparing makes no call and counts none; each run makes the call
// again, host steps included (avg's division), and bypasses counting.
TEST(CollectivesOverMpi, PreparedCallRepeatsTheCallAlone) {
    Communicator& comm = *world->data;
    comm.stats().reset();
    const int n = comm.size();
    std::vector<float> send(5), recv(5, -1.0f);
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(comm.rank() + i);
    const auto op = comm.prepare([&] { comm.allreduce(send.data(), recv.data(), 5, DType::float32, ReduceOp::avg); });
    EXPECT_FLOAT_EQ(recv[0], -1.0f) << "preparing made the call";
    EXPECT_TRUE(comm.stats().by_op.empty()) << "preparing counted a call it did not make";
    for (int repeat = 0; repeat < 2; ++repeat) {
        std::fill(recv.begin(), recv.end(), -1.0f);
        op->run();
        for (std::size_t i = 0; i < recv.size(); ++i) EXPECT_FLOAT_EQ(recv[i], (n - 1) / 2.0f + i);
    }
    EXPECT_TRUE(comm.stats().by_op.empty());
    EXPECT_TRUE(comm.stats().enabled);

    // A two-call issue repeats both, in order: the gather of each rank's sum.
    std::vector<float> sums(static_cast<std::size_t>(n));
    const auto two = comm.prepare([&] {
        comm.allreduce(send.data(), recv.data(), 5, DType::float32, ReduceOp::sum);
        comm.allgather(recv.data(), sums.data(), 1, DType::float32);
    });
    two->run();
    for (float sum : sums) EXPECT_FLOAT_EQ(sum, n * (n - 1) / 2.0f);

    EXPECT_THROW(comm.prepare([&] { comm.iallreduce(send.data(), recv.data(), 5, DType::float32, ReduceOp::sum); }),
                 std::logic_error);
    // The refusal leaves the communicator making and counting its calls.
    comm.allreduce(send.data(), recv.data(), 5, DType::float32, ReduceOp::sum);
    EXPECT_FLOAT_EQ(recv[0], n * (n - 1) / 2.0f);
    EXPECT_EQ(comm.stats().by_op.at("allreduce").calls, 1u);
}

// A sendrecv on one rank pairs with plain send and recv on the other (one tag for all).
TEST(CollectivesOverMpi, SendRecvMatchesSendAndRecv) {
    Communicator& comm = *world->data;
    if (comm.size() < 2 || comm.rank() > 1) return;
    const int peer = 1 - comm.rank();
    std::int64_t out = 100 + comm.rank(), in = -1;
    if (comm.rank() == 0) {
        comm.sendrecv(&out, peer, &in, peer, 1, DType::int64);
    } else {
        comm.send(&out, 1, DType::int64, peer);
        comm.recv(&in, 1, DType::int64, peer);
    }
    EXPECT_EQ(in, 100 + peer);
}

// Records what a communicator tells its observer: every blocking call and every wait, with
// its size and peers, and nothing once the observation ends.
class RecordingObserver : public CallObserver {
  public:
    int add_channel(const std::string& name, const std::vector<int>& world_ranks) override {
        names.push_back(name);
        ranks = world_ranks;
        return 7;
    }
    void call_started(int channel, const Call& call) noexcept override {
        EXPECT_EQ(channel, 7);
        EXPECT_FALSE(inside) << call.op << " started inside another call";
        inside = true;
        calls.push_back(call);
    }
    void call_ended(int channel) noexcept override {
        EXPECT_EQ(channel, 7);
        EXPECT_TRUE(inside);
        inside = false;
    }
    std::vector<std::string> names;
    std::vector<int> ranks;
    std::vector<Call> calls;
    bool inside = false;
};

TEST(CollectivesOverMpi, ObserverHearsEveryBlockingCallAndWait) {
    Communicator& comm = *world->data;
    const int n = comm.size();
    RecordingObserver observer;
    std::vector<double> values(4, 1.0), sums(4);
    {
        const CallObservation observed = comm.observe_calls(observer, "tp", {0});
        comm.allreduce(values.data(), sums.data(), values.size(), DType::float64, ReduceOp::sum);
        comm.barrier();
        if (n > 1) {
            const int next = (comm.rank() + 1) % n, previous = (comm.rank() + n - 1) % n;
            float out = 1.0f, in = 0.0f;
            Request receive = comm.irecv(&in, 1, DType::float32, previous);
            Request sent = comm.isend(&out, 1, DType::float32, next);
            receive.wait();
            sent.wait();
            comm.sendrecv(&out, next, &in, previous, 1, DType::float32);
        }
        EXPECT_FALSE(observer.inside);
    }
    comm.allreduce(values.data(), sums.data(), values.size(), DType::float64, ReduceOp::sum);  // not observed
    EXPECT_EQ(observer.names, std::vector<std::string>{"tp"});
    ASSERT_EQ(observer.calls.size(), n > 1 ? 5u : 2u);
    EXPECT_STREQ(observer.calls[0].op, "allreduce");
    EXPECT_EQ(observer.calls[0].bytes, 32u);
    EXPECT_FALSE(observer.calls[0].wait);
    EXPECT_STREQ(observer.calls[1].op, "barrier");
    if (n > 1) {
        const int next = (comm.rank() + 1) % n, previous = (comm.rank() + n - 1) % n;
        EXPECT_STREQ(observer.calls[2].op, "recv");
        EXPECT_TRUE(observer.calls[2].wait);
        EXPECT_EQ(observer.calls[2].from, previous);
        EXPECT_STREQ(observer.calls[3].op, "send");
        EXPECT_EQ(observer.calls[3].to, next);
        EXPECT_EQ(observer.calls[3].bytes, 4u);
        EXPECT_STREQ(observer.calls[4].op, "sendrecv");
        EXPECT_EQ(observer.calls[4].to, next);
        EXPECT_EQ(observer.calls[4].from, previous);
        EXPECT_FALSE(observer.calls[4].wait);
    }
}

TEST(CollectivesOverMpi, SplitFormsGroups) {
    Communicator& comm = *world->data;
    auto half = comm.split(comm.rank() % 2, comm.rank());
    EXPECT_EQ(half->size(), (comm.size() + 1 - comm.rank() % 2) / 2);
    int value = 1, total = 0;
    half->allreduce(&value, &total, 1, DType::int32, ReduceOp::sum);
    EXPECT_EQ(total, half->size());
}

}  // namespace
}  // namespace parbench

int main(int argc, char** argv) { return parbench::run_all_tests_on_every_rank(argc, argv, parbench::world); }

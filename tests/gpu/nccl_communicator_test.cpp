// NcclCommunicator on the GPUs present (one rank is enough; run under mpirun -np N for N
// GPUs): every collective of the registry, in and out of place, validated element by
// element with the shared formulas; then the non-blocking forms, split and graph capture.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/collective.hpp"
#include "comm/nccl_communicator.hpp"
#include "device/cuda_device.hpp"
#include "gpu_test_environment.hpp"

namespace parbench::testing_gpu {
namespace {

class NcclCommunicatorTest : public GpuTest {
  protected:
    CudaDevice& device() { return static_cast<CudaDevice&>(*environment().nccl().device); }
    Communicator& comm() { return *environment().nccl().comm; }

    InputPattern pattern_of(const Collective& collective, const CollectiveParams& params, int rank) {
        return {params.op, collective.reducing(), comm().size(), rank,
                choose_modulus(params.type, params.op, collective.reducing(), comm().size())};
    }

    // Runs the collective once on fresh inputs and returns the wrong elements over all ranks.
    std::size_t run_and_count_wrong(const Collective& collective, std::size_t count, const CollectiveParams& params,
                                    bool inplace) {
        const int nranks = comm().size();
        const int rank = comm().rank();
        const std::size_t element = dtype_size(params.type);
        const BufferShape shape = collective.shape(count, nranks, rank, params);
        const InputPattern pattern = pattern_of(collective, params, rank);
        Buffer input = device().allocate((inplace ? shape.inplace_count : shape.send_count) * element);
        Buffer output = inplace ? input : device().allocate(shape.recv_count * element);
        const std::size_t input_offset = inplace ? shape.inplace_send_offset : 0;
        const std::size_t output_offset = inplace ? shape.inplace_recv_offset : 0;
        device().fill_input(input, input_offset, shape.send_count, params.type, pattern);
        collective.run(comm(), input.as<char>() + input_offset * element, output.as<char>() + output_offset * element,
                       count, params);
        comm().synchronize();
        std::size_t wrong = 0;
        if (auto layout = collective.expected(count, nranks, rank, params, pattern))
            wrong = device().count_wrong(output, output_offset, shape.recv_count, params.type, *layout);
        std::uint64_t mine = wrong;
        std::uint64_t total = 0;
        environment().control().allreduce(&mine, &total, 1, DType::uint64, ReduceOp::sum);
        return static_cast<std::size_t>(total);
    }
};

TEST_F(NcclCommunicatorTest, EveryCollectiveInAndOutOfPlace) {
    const int nranks = comm().size();
    // The first and the last rank as root: a root other than 0 catches offsets taken from 0.
    std::vector<int> roots{0};
    if (nranks > 1) roots.push_back(nranks - 1);
    for (const Collective* collective : all_collectives()) {
        const std::size_t count = collective->count_multiple(nranks) * 1031;
        for (bool inplace : {false, true}) {
            if (inplace && !collective->supports_inplace()) continue;
            for (int root : roots) {
                if (root != 0 && !collective->rooted()) continue;
                const CollectiveParams params{DType::float32, ReduceOp::sum, root};
                EXPECT_EQ(run_and_count_wrong(*collective, count, params, inplace), 0u)
                    << collective->name() << (inplace ? " in place" : " out of place") << " root " << root;
            }
        }
    }
}

TEST_F(NcclCommunicatorTest, ReductionsOverEveryTypeAndOperation) {
    for (const Collective* collective : all_collectives()) {
        if (!collective->reducing()) continue;
        const std::size_t count = collective->count_multiple(comm().size()) * 257;
        for (DType type : all_dtypes())
            for (ReduceOp op : all_reduce_ops()) {
                if (reduce_op_unsupported_reason(op, type)) continue;
                const CollectiveParams params{type, op, 0};
                EXPECT_EQ(run_and_count_wrong(*collective, count, params, false), 0u)
                    << collective->name() << " " << dtype_name(type) << " " << reduce_op_name(op);
            }
    }
}

TEST_F(NcclCommunicatorTest, DataMovementOverEveryType) {
    for (const Collective* collective : all_collectives()) {
        if (collective->reducing()) continue;
        const std::size_t count = collective->count_multiple(comm().size()) * 129;
        for (DType type : all_dtypes())
            EXPECT_EQ(run_and_count_wrong(*collective, count, {type, ReduceOp::sum, 0}, collective->supports_inplace()),
                      0u)
                << collective->name() << " " << dtype_name(type);
    }
}

// alltoallv's grouped ncclSend/ncclRecv under every form of --skew, with empty blocks at
// counts below the rank count (both sides then post nothing for the pair).
TEST_F(NcclCommunicatorTest, AlltoallvEverySkew) {
    const Collective* alltoallv = find_collective("alltoallv");
    ASSERT_NE(alltoallv, nullptr);
    const std::string every_rank_hot = "hot:" + std::to_string(comm().size());
    for (const std::string& skew : {std::string("uniform"), std::string("zipf:1.2"), std::string("zipf:40"),
                                   std::string("hot:1"), every_rank_hot})
        for (std::size_t count : {1u, 1031u, 1u << 20}) {
            const CollectiveParams params{DType::float32, ReduceOp::sum, 0, parse_skew(skew, 3)};
            EXPECT_EQ(run_and_count_wrong(*alltoallv, count, params, false), 0u) << skew << " count " << count;
        }
}

TEST_F(NcclCommunicatorTest, LargeAllreduce) {
    const Collective* allreduce = find_collective("allreduce");
    ASSERT_NE(allreduce, nullptr);
    EXPECT_EQ(run_and_count_wrong(*allreduce, std::size_t{64} << 20, {DType::float32, ReduceOp::sum, 0}, false), 0u);
}

TEST_F(NcclCommunicatorTest, NonBlockingAllreduceOrdersTheMainStream) {
    const Collective* allreduce = find_collective("allreduce");
    const CollectiveParams params{DType::float32, ReduceOp::sum, 0};
    const std::size_t count = 1 << 20;
    const InputPattern pattern = pattern_of(*allreduce, params, comm().rank());
    Buffer send = device().allocate(count * 4);
    Buffer recv = device().allocate(count * 4);
    Buffer copy = device().allocate(count * 4);
    device().fill_input(send, 0, count, params.type, pattern);
    Request request = comm().iallreduce(send.data(), recv.data(), count, params.type, params.op);
    request.wait();
    // Stream-ordered after wait(): the copy must see the finished reduction.
    device().copy(copy, 0, recv, 0, count * 4);
    comm().synchronize();
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.reduced = true;
    EXPECT_EQ(device().count_wrong(copy, 0, count, params.type, layout), 0u);
    EXPECT_FALSE(request.pending());
}

// ialltoallv with even blocks is the registry's alltoall: its expected layout checks it, after
// wait() ordered a copy on the main stream behind it (what the MoE layer's overlap relies on).
TEST_F(NcclCommunicatorTest, NonBlockingAlltoallvOrdersTheMainStream) {
    comm().stats().reset();
    const Collective* alltoall = find_collective("alltoall");
    const CollectiveParams params{DType::float32, ReduceOp::sum, 0};
    const auto n = static_cast<std::size_t>(comm().size());
    const std::size_t per_peer = 1 << 16, count = per_peer * n;
    const InputPattern pattern = pattern_of(*alltoall, params, comm().rank());
    Buffer send = device().allocate(count * 4);
    Buffer recv = device().allocate(count * 4);
    Buffer copy = device().allocate(count * 4);
    device().fill_input(send, 0, count, params.type, pattern);
    std::vector<std::size_t> counts(n, per_peer), offsets(n);
    for (std::size_t q = 0; q < n; ++q) offsets[q] = q * per_peer;
    Request request = comm().ialltoallv(send.data(), counts, offsets, recv.data(), counts, offsets, params.type);
    request.wait();
    device().copy(copy, 0, recv, 0, count * 4);
    comm().synchronize();
    const auto layout = alltoall->expected(count, comm().size(), comm().rank(), params, pattern);
    ASSERT_TRUE(layout.has_value());
    EXPECT_EQ(device().count_wrong(copy, 0, count, params.type, *layout), 0u);
    EXPECT_FALSE(request.pending());
    EXPECT_EQ(comm().stats().by_op.at("alltoallv").calls, 1u);
}

TEST_F(NcclCommunicatorTest, NonBlockingRequestTestsComplete) {
    const std::size_t count = 1 << 16;
    Buffer send = device().allocate(count * 4);
    Buffer recv = device().allocate(count * 4 * static_cast<std::size_t>(comm().size()));
    Request request = comm().iallgather(send.data(), recv.data(), count, DType::float32);
    comm().synchronize();
    EXPECT_TRUE(request.test());
    EXPECT_FALSE(request.pending());
}

// Even ranks send first and odd ranks receive first, so a pair never waits on itself.
TEST_F(NcclCommunicatorTest, NonBlockingSendRecvBetweenPairs) {
    if (comm().size() < 2) GTEST_SKIP() << "needs two ranks with a GPU each (mpirun -np 2 on 2 GPUs)";
    const int rank = comm().rank();
    const int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
    if (peer >= comm().size()) GTEST_SKIP() << "rank " << rank << " has no partner";
    const std::size_t count = 1 << 18;
    InputPattern pattern;
    pattern.rank = rank;
    pattern.modulus = 100;
    Buffer send = device().allocate(count * 4);
    Buffer recv = device().allocate(count * 4);
    device().fill_input(send, 0, count, DType::float32, pattern);
    Request first = rank % 2 == 0 ? comm().isend(send.data(), count, DType::float32, peer)
                                  : comm().irecv(recv.data(), count, DType::float32, peer);
    Request second = rank % 2 == 0 ? comm().irecv(recv.data(), count, DType::float32, peer)
                                   : comm().isend(send.data(), count, DType::float32, peer);
    first.wait();
    second.wait();
    comm().synchronize();
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.fixed_source_rank = peer;
    EXPECT_EQ(device().count_wrong(recv, 0, count, DType::float32, layout), 0u);
}

TEST_F(NcclCommunicatorTest, SplitIntoHalvesReduces) {
    const int rank = comm().rank();
    auto half = comm().split(rank % 2, rank);
    ASSERT_NE(half, nullptr);
    EXPECT_EQ(half->backend(), "nccl");
    EXPECT_EQ(half->size(), (comm().size() + (rank % 2 == 0 ? 1 : 0)) / 2);
    std::vector<float> one(1024, 1.0f);
    Buffer data = device().allocate(one.size() * sizeof(float));
    device().copy_from_host(data, one.data(), data.bytes());
    half->allreduce(data.data(), data.data(), one.size(), DType::float32, ReduceOp::sum);
    half->synchronize();
    std::vector<float> result(one.size());
    device().copy_to_host(result.data(), data, data.bytes());
    EXPECT_EQ(result.front(), static_cast<float>(half->size()));
    EXPECT_EQ(result.back(), static_cast<float>(half->size()));
    half->barrier();
}

TEST_F(NcclCommunicatorTest, CapturedAllreduceReplays) {
    const Collective* allreduce = find_collective("allreduce");
    const CollectiveParams params{DType::float32, ReduceOp::sum, 0};
    const std::size_t count = 1 << 16;
    const InputPattern pattern = pattern_of(*allreduce, params, comm().rank());
    Buffer send = device().allocate(count * 4);
    Buffer recv = device().allocate(count * 4);
    device().fill_input(send, 0, count, params.type, pattern);
    comm().allreduce(send.data(), recv.data(), count, params.type, params.op);  // warm-up, as the harness does
    comm().synchronize();
    device().fill_zero(recv);
    auto graph = device().capture([&] { comm().allreduce(send.data(), recv.data(), count, params.type, params.op); });
    ASSERT_NE(graph, nullptr);
    for (int i = 0; i < 3; ++i) graph->replay();
    comm().synchronize();
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.reduced = true;
    EXPECT_EQ(device().count_wrong(recv, 0, count, params.type, layout), 0u);
}

TEST_F(NcclCommunicatorTest, InPlaceAlltoallCapturedAfterWarmUp) {
    const Collective* alltoall = find_collective("alltoall");
    const CollectiveParams params{DType::int32, ReduceOp::sum, 0};
    const std::size_t count = static_cast<std::size_t>(comm().size()) * 4096;
    const InputPattern pattern = pattern_of(*alltoall, params, comm().rank());
    Buffer data = device().allocate(count * 4);
    device().fill_input(data, 0, count, params.type, pattern);
    alltoall->run(comm(), data.data(), data.data(), count, params);  // allocates the scratch
    comm().synchronize();
    auto graph = device().capture([&] { alltoall->run(comm(), data.data(), data.data(), count, params); });
    ASSERT_NE(graph, nullptr);
    device().fill_input(data, 0, count, params.type, pattern);
    graph->replay();
    comm().synchronize();
    const auto layout = alltoall->expected(count, comm().size(), comm().rank(), params, pattern);
    ASSERT_TRUE(layout.has_value());
    EXPECT_EQ(device().count_wrong(data, 0, count, params.type, *layout), 0u);
}

TEST_F(NcclCommunicatorTest, BarrierAndCounters) {
    comm().stats().reset();
    Buffer data = device().allocate(4096);
    comm().allreduce(data.data(), data.data(), 1024, DType::float32, ReduceOp::sum);
    comm().barrier();
    EXPECT_EQ(comm().stats().by_op.at("allreduce").calls, 1u);
    EXPECT_EQ(comm().stats().by_op.at("allreduce").bytes, 4096u);
}

}  // namespace
}  // namespace parbench::testing_gpu

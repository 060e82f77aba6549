// --background's pieces without MPI or a GPU: the spec and the throughput conventions from
// literal values, the load loop (bench/load_loop.hpp) against scripted queues, among them one
// that completes units only when waited for, as a GPU stream does, and two "ranks" on threads
// that stop at different units, and the CPU load on the CPU device (the GPU loads are
// tests/gpu/background_load_test.cpp's).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/background_load.hpp"
#include "bench/load_loop.hpp"
#include "core/error.hpp"
#include "device/cpu_device.hpp"
#include "kernels/stream_triad_math.hpp"

namespace parbench {
namespace {

TEST(BackgroundSpec, ParsesEachLoadWithItsDefaultAndRefusesTheRestNamingTheFlag) {
    EXPECT_EQ(background_name(parse_background("gemm")), "gemm:512");
    EXPECT_EQ(background_name(parse_background("gemm:4096")), "gemm:4096");
    EXPECT_EQ(background_name(parse_background("stream:64M")), "stream:67108864");
    EXPECT_EQ(background_name(parse_background("collective")), "collective:1048576");
    EXPECT_EQ(background_unit(parse_background("gemm")), "GFLOP/s");
    EXPECT_EQ(background_unit(parse_background("collective:1K")), "GB/s");
    for (const char* bad : {"gemm:15", "gemm:16385", "gemm:1e3", "stream:32", "collective:17G", "spin", "gpu:1M"}) {
        try {
            parse_background(bad);
            ADD_FAILURE() << bad << " was accepted";
        } catch (const UsageError& error) {
            EXPECT_NE(std::string(error.what()).find("--background"), std::string::npos) << error.what();
        }
    }
}

TEST(BackgroundSpec, WorkPerUnitFollowsEachLoadsConvention) {
    // 2 N^3 flops a GEMM; STREAM counts the three arrays of a pass; an all-reduce's bus bytes are
    // 2 (n-1)/n of its buffer (nccl-tests).
    EXPECT_DOUBLE_EQ(background_work_per_unit(parse_background("gemm:512"), 1), 2.0 * 512 * 512 * 512);
    EXPECT_EQ(background_elements(parse_background("gemm:512")), 512u * 512u);
    EXPECT_EQ(background_elements(parse_background("stream:96")), 8u);
    EXPECT_DOUBLE_EQ(background_work_per_unit(parse_background("stream:96"), 1), 96.0);
    EXPECT_DOUBLE_EQ(background_work_per_unit(parse_background("collective:1M"), 4), 1048576.0 * 1.5);
    EXPECT_DOUBLE_EQ(background_work_per_unit(parse_background("collective:1M"), 1), 0.0);
    const BackgroundTally tally = background_tally(parse_background("gemm:1000"), 1, 5, 0.5);
    EXPECT_EQ(tally.units, 5u);
    EXPECT_DOUBLE_EQ(tally.throughput, 5 * 2e9 / 0.5 / 1e9);
    EXPECT_EQ(background_tally(parse_background("gemm:1000"), 1, 0, 0.0).throughput, 0.0);
}

TEST(StreamTriad, IsStreamsFormula) {
    EXPECT_EQ(stream_triad(1.0f, 2.0f), 7.0f);  // a = b + 3 c
    EXPECT_EQ(stream_triad(-3.0f, 1.0f), 0.0f);
}

// A queue whose units finish only when waited for, the latest a GPU stream could finish them: it
// records how far ahead of the finished units the loop ever ran, and asks to stop at a unit.
class LazyQueue final : public LoadQueue {
  public:
    LazyQueue(std::atomic<bool>& stopping, std::uint64_t stop_at) : stopping_(stopping), stop_at_(stop_at) {}
    bool has_peers() const override { return false; }
    void enqueue_unit() override {
        ++enqueued;
        most_ahead = std::max(most_ahead, enqueued - finished);
        if (enqueued == stop_at_) stopping_ = true;
    }
    void enqueue_vote(bool, int) override { ADD_FAILURE() << "a load without peers voted"; }
    void mark(int slot) override { marked_at[static_cast<std::size_t>(slot)] = enqueued; }
    void wait(int slot) override { finished = std::max(finished, marked_at[static_cast<std::size_t>(slot)]); }
    bool all_asked_to_stop(int) override {
        ADD_FAILURE() << "a load without peers read a vote";
        return true;
    }

    std::uint64_t enqueued = 0;
    std::uint64_t finished = 0;
    std::uint64_t most_ahead = 0;
    std::array<std::uint64_t, 3> marked_at{};

  private:
    std::atomic<bool>& stopping_;
    std::uint64_t stop_at_;
};

TEST(LoadLoop, WithoutPeersStopsAfterTheUnitInProgressAndStaysWithinItsDepth) {
    for (int depth : {2, 3}) {
        std::atomic<bool> stopping{false};
        LazyQueue queue(stopping, 10);
        EXPECT_EQ(run_load_loop(queue, stopping, depth), 10u);
        EXPECT_EQ(queue.enqueued, 10u);
        EXPECT_EQ(queue.most_ahead, static_cast<std::uint64_t>(depth)) << "depth " << depth;
    }
    std::atomic<bool> stopping{true};  // asked before it started: one unit, as the CPU load always did
    LazyQueue queue(stopping, 0);
    EXPECT_EQ(run_load_loop(queue, stopping, 2), 1u);
    EXPECT_THROW(run_load_loop(queue, stopping, 1), std::logic_error);
}

// Two ranks on two threads: a vote is the minimum over both (an all-reduce), and a vote may be
// read only after the queue was waited past the mark that followed it.
struct Votes {
    std::barrier<> meet{2};
    std::array<int, 2> cast{};
};

class PeerQueue final : public LoadQueue {
  public:
    PeerQueue(int rank, Votes& votes, std::atomic<bool>& stopping, std::uint64_t stop_at)
        : rank_(rank), votes_(votes), stopping_(stopping), stop_at_(stop_at) {}
    bool has_peers() const override { return true; }
    void enqueue_unit() override {
        if (++units == stop_at_) stopping_ = true;
    }
    void enqueue_vote(bool stopping, int slot) override {
        votes_.cast[static_cast<std::size_t>(rank_)] = stopping ? 1 : 0;
        votes_.meet.arrive_and_wait();
        result_[static_cast<std::size_t>(slot)] = std::min(votes_.cast[0], votes_.cast[1]);
        waited_[static_cast<std::size_t>(slot)] = false;
        votes_.meet.arrive_and_wait();  // both have read before either votes again
    }
    void mark(int) override {}
    void wait(int slot) override { waited_[static_cast<std::size_t>(slot)] = true; }
    bool all_asked_to_stop(int slot) override {
        if (!waited_[static_cast<std::size_t>(slot)]) read_before_wait = true;
        return result_[static_cast<std::size_t>(slot)] == 1;
    }

    std::uint64_t units = 0;
    bool read_before_wait = false;

  private:
    int rank_;
    Votes& votes_;
    std::atomic<bool>& stopping_;
    std::uint64_t stop_at_;
    std::array<int, 2> result_{};
    std::array<bool, 2> waited_{};
};

TEST(LoadLoop, PeersStopTogetherAfterTheUnitAllHadAskedBy) {
    // Rank 0 asks during its 3rd unit, rank 1 during its 40th: the 40th unit's vote is the first
    // that all cast, and it is read after the 41st is enqueued, so both run 41 units.
    Votes votes;
    std::array<std::atomic<bool>, 2> stopping{};
    PeerQueue first(0, votes, stopping[0], 3);
    PeerQueue second(1, votes, stopping[1], 40);
    std::uint64_t ran_first = 0;
    std::thread other([&] { ran_first = run_load_loop(first, stopping[0], 2); });
    const std::uint64_t ran_second = run_load_loop(second, stopping[1], 2);
    other.join();
    EXPECT_EQ(ran_first, 41u);
    EXPECT_EQ(ran_second, 41u);
    EXPECT_EQ(first.units, 41u);
    EXPECT_FALSE(first.read_before_wait || second.read_before_wait) << "a vote was read before its unit was waited for";
}

TEST(LoadThread, StopRethrowsWhatTheBodyThrewAndTheThreadCanStartAgain) {
    LoadThread thread;
    thread.start([](const std::atomic<bool>&) { throw RuntimeFailure("cudaLaunchKernel failed"); });
    EXPECT_THROW(thread.stop(), RuntimeFailure);
    bool ran = false;  // read after the join
    thread.start([&](const std::atomic<bool>& stopping) {
        ran = true;
        while (!stopping) std::this_thread::yield();
    });
    EXPECT_NO_THROW(thread.stop());
    EXPECT_TRUE(ran);
    EXPECT_THROW(thread.stop(), std::logic_error);
}

TEST(CpuBackgroundLoad, RunsEachLocalLoadUntilStoppedAndAgain) {
    CpuDevice device;
    for (const char* text : {"gemm:32", "stream:3K"}) {
        CpuBackgroundLoad load(parse_background(text), device, nullptr);
        for (int round = 0; round < 2; ++round) {
            load.start();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            const BackgroundTally tally = load.stop();
            EXPECT_GT(tally.units, 0u) << text;
            EXPECT_GE(tally.seconds, 0.02) << text;
            EXPECT_GT(tally.throughput, 0.0) << text;
        }
    }
}

}  // namespace
}  // namespace parbench

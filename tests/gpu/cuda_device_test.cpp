// CudaDevice on a real GPU: zeroed allocations, free memory, copies, event timing and graph capture.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "device/cuda_device.hpp"
#include "gpu_test_environment.hpp"

namespace parbench::testing_gpu {
namespace {

class CudaDeviceTest : public GpuTest {
  protected:
    CudaDevice& device() { return static_cast<CudaDevice&>(*environment().nccl().device); }
};

std::vector<std::uint8_t> read_back(const CudaDevice& device, const Buffer& buffer) {
    std::vector<std::uint8_t> host(buffer.bytes());
    device.copy_to_host(host.data(), buffer, host.size());
    return host;
}

TEST_F(CudaDeviceTest, AllocationsAreZeroed) {
    Buffer buffer = device().allocate(3 << 20);
    ASSERT_EQ(buffer.bytes(), 3u << 20);
    const auto host = read_back(device(), buffer);
    EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](std::uint8_t byte) { return byte == 0; }));
}

// The resource check's view of the GPU: its free memory, which an allocation lowers, and an
// identity ranks sharing it have in common.
TEST_F(CudaDeviceTest, FreeMemoryIsTheGpusAndFallsWithAnAllocation) {
    const auto before = device().free_memory();
    ASSERT_TRUE(before);
    EXPECT_FALSE(before->is_host_memory);
    EXPECT_EQ(before->id.rfind("GPU-", 0), 0u) << before->id;
    EXPECT_EQ(before->id.size(), 4u + 32 + 4) << before->id;
    EXPECT_NE(before->what.find(device().name()), std::string::npos) << before->what;
    EXPECT_GT(before->free_bytes, 0u);
    Buffer held = device().allocate(std::size_t{512} << 20);
    const auto after = device().free_memory();
    ASSERT_TRUE(after);
    EXPECT_LE(after->free_bytes + (std::uint64_t{256} << 20), before->free_bytes);
    EXPECT_EQ(after->id, before->id);
}

TEST_F(CudaDeviceTest, CopiesRoundTripWithOffsets) {
    std::vector<std::uint8_t> pattern(1 << 16);
    std::iota(pattern.begin(), pattern.end(), std::uint8_t{7});
    Buffer source = device().allocate(pattern.size());
    Buffer target = device().allocate(pattern.size() + 100);
    device().copy_from_host(source, pattern.data(), pattern.size());
    device().copy(target, 100, source, 0, pattern.size());
    const auto host = read_back(device(), target);
    EXPECT_TRUE(std::equal(pattern.begin(), pattern.end(), host.begin() + 100));
    device().fill_zero(target);
    const auto zeroed = read_back(device(), target);
    EXPECT_TRUE(std::all_of(zeroed.begin(), zeroed.end(), [](std::uint8_t byte) { return byte == 0; }));
}

TEST_F(CudaDeviceTest, TimerMeasuresStreamWork) {
    Buffer big = device().allocate(256 << 20);
    auto timer = device().make_timer();
    timer->start();
    for (int i = 0; i < 4; ++i) device().fill_zero(big);
    timer->stop();
    const double microseconds = timer->elapsed_us();
    // 1 GiB of memset takes well over a microsecond and well under ten seconds on any GPU.
    EXPECT_GT(microseconds, 1.0);
    EXPECT_LT(microseconds, 10e6);
}

TEST_F(CudaDeviceTest, CapturedWorkRunsOnlyWhenReplayed) {
    std::vector<std::uint8_t> pattern(4096, 0x5a);
    Buffer source = device().allocate(pattern.size());
    Buffer target = device().allocate(pattern.size());
    device().copy_from_host(source, pattern.data(), pattern.size());
    auto graph = device().capture([&] { device().copy(target, 0, source, 0, pattern.size()); });
    ASSERT_NE(graph, nullptr);
    device().synchronize();
    EXPECT_EQ(read_back(device(), target)[0], 0) << "capture must record the copy, not run it";
    graph->replay();
    graph->replay();
    device().synchronize();
    EXPECT_EQ(read_back(device(), target), pattern);
}

TEST_F(CudaDeviceTest, CaptureLeavesTheStreamUsableWhenWorkThrows) {
    EXPECT_THROW(device().capture([] { throw RuntimeFailure("inside capture"); }), RuntimeFailure);
    Buffer buffer = device().allocate(64);
    device().fill_zero(buffer);
    device().synchronize();
}

TEST_F(CudaDeviceTest, OutOfMemoryNamesTheFix) {
    try {
        device().allocate(std::size_t{1} << 60);
        FAIL() << "an exabyte allocation succeeded";
    } catch (const RuntimeFailure& error) {
        EXPECT_NE(std::string(error.what()).find("out of GPU memory"), std::string::npos) << error.what();
    }
    Buffer still_works = device().allocate(64);
    EXPECT_EQ(still_works.bytes(), 64u);
}

TEST_F(CudaDeviceTest, ReportsVersions) {
    const auto versions = device().versions();
    for (const char* key : {"cuda_driver", "cuda_runtime", "nccl", "gpu"}) {
        ASSERT_TRUE(versions.count(key)) << key;
        EXPECT_FALSE(versions.at(key).empty()) << key;
    }
    EXPECT_TRUE(device().is_gpu());
    EXPECT_EQ(device().kind(), "cuda");
}

}  // namespace
}  // namespace parbench::testing_gpu

// The resource check's arithmetic from literal numbers: how a memory is divided among the
// ranks that share it, which ranks share one, and which budget each need is checked against
// (the host's alone on CPU; a GPU's and the host's apart). The CPU device's free memory is
// the host's MemAvailable. (The CUDA side, cudaMemGetInfo, is compiled here but runs only on
// a GPU machine.)
#include <gtest/gtest.h>

#include <cmath>

#include "core/memory_budget.hpp"
#include "device/cpu_device.hpp"

namespace parbench {
namespace {

constexpr std::uint64_t gib = 1024ull * 1024 * 1024;

TEST(MemoryBudget, DividesAMemoryAmongTheRanksSharingIt) {
    const MemoryBudget gpu = shared_memory_budget(80 * gib, "free memory of GPU 0 (H100)", 2, "on this GPU");
    EXPECT_EQ(gpu.per_rank_bytes, 40 * gib);
    EXPECT_EQ(gpu.source, "free memory of GPU 0 (H100) 80.0 GiB shared by 2 ranks on this GPU");
    const MemoryBudget alone = shared_memory_budget(80 * gib, "MemAvailable", 1, "on this host");
    EXPECT_EQ(alone.per_rank_bytes, 80 * gib);
    EXPECT_EQ(alone.source, "MemAvailable 80.0 GiB on this host");
    EXPECT_EQ(shared_memory_budget(9, "x", 0, "here").per_rank_bytes, 9u);  // no rank counts as one
    EXPECT_EQ(shared_memory_budget(10, "x", 3, "here").per_rank_bytes, 3u);
}

TEST(MemoryBudget, RanksShareAMemoryWhenHostAndDeviceAgree) {
    // Two hosts; on host a, ranks 0 and 2 see one GPU under different ordinals.
    const std::vector<std::string> keys{"a|GPU-1", "a|GPU-2", "a|GPU-1", "b|GPU-1"};
    EXPECT_EQ(ranks_sharing(keys, 0), 2);
    EXPECT_EQ(ranks_sharing(keys, 1), 1);
    EXPECT_EQ(ranks_sharing(keys, 2), 2);
    EXPECT_EQ(ranks_sharing(keys, 3), 1);  // the same UUID text on another host is another GPU
    EXPECT_EQ(ranks_sharing({"a|host", "a|host", "a|host"}, 1), 3);
    EXPECT_EQ(ranks_sharing(keys, 9), 1);
}

TEST(MemoryBudget, OnCpuEveryNeedComesOutOfTheHostBudget) {
    const MemoryBudget host{10 * gib, "MemAvailable 20.0 GiB shared by 2 ranks on this host"};
    const std::vector<MemoryNeed> buffers{{"buffers", 6.0 * gib, "--size 3G"}};
    const std::vector<MemoryNeed> samples{{"samples", 5.0 * gib, "--iters 9"}};
    const auto refusal = placed_memory_refusal(buffers, samples, std::nullopt, host, "lower it");
    ASSERT_TRUE(refusal);
    EXPECT_EQ(*refusal,
              "--size 3G: the run needs 11.0 GiB per rank (buffers 6.0 GiB; samples 5.0 GiB), but MemAvailable 20.0 "
              "GiB shared by 2 ranks on this host leaves 10.0 GiB per rank; lower it");
    EXPECT_FALSE(placed_memory_refusal(buffers, {}, std::nullopt, host, "lower it"));
    EXPECT_FALSE(placed_memory_refusal(buffers, samples, std::nullopt, std::nullopt, "lower it"));
}

TEST(MemoryBudget, OnGpuDeviceAndHostNeedsAreCheckedApart) {
    const MemoryBudget host{10 * gib, "MemAvailable 10.0 GiB on this host"};
    const MemoryBudget device{40 * gib, "free memory of GPU 0 (H100) 80.0 GiB shared by 2 ranks on this GPU"};
    const std::vector<MemoryNeed> buffers{{"buffers", 30.0 * gib, "--size 15G"}};
    const std::vector<MemoryNeed> samples{{"samples", 5.0 * gib, "--iters 9"}};
    // 35 GiB in all would not fit the host's 10, but only 5 of it lives there.
    EXPECT_FALSE(placed_memory_refusal(buffers, samples, device, host, "lower it"));
    const std::vector<MemoryNeed> big{{"buffers", 50.0 * gib, "--size 25G"}};
    const auto on_gpu = placed_memory_refusal(big, samples, device, host, "lower it");
    ASSERT_TRUE(on_gpu);
    EXPECT_EQ(on_gpu->rfind("--size 25G: the run needs 50.0 GiB per rank (buffers 50.0 GiB), but free memory of GPU 0",
                            0),
              0u)
        << *on_gpu;
    EXPECT_NE(on_gpu->find("shared by 2 ranks on this GPU leaves 40.0 GiB per rank"), std::string::npos) << *on_gpu;
    const std::vector<MemoryNeed> many{{"samples", 12.0 * gib, "--iters 99"}};
    const auto on_host = placed_memory_refusal(buffers, many, device, host, "lower it");
    ASSERT_TRUE(on_host);
    EXPECT_EQ(on_host->rfind("--iters 99: the run needs 12.0 GiB per rank (samples 12.0 GiB), but MemAvailable", 0), 0u)
        << *on_host;
    EXPECT_FALSE(placed_memory_refusal(buffers, many, device, std::nullopt, "lower it"));
}

TEST(MemoryBudget, TheCpuDevicesMemoryIsTheHostsMemAvailable) {
    const auto memory = CpuDevice().free_memory();
    const auto available = host_memory_available();
    ASSERT_EQ(memory.has_value(), available.has_value());
    if (!memory) GTEST_SKIP() << "no /proc/meminfo here";
    EXPECT_TRUE(memory->is_host_memory);
    EXPECT_EQ(memory->what, "MemAvailable");
    EXPECT_EQ(memory->id, "host");
    // Read twice a moment apart: equal to within what other processes did meanwhile.
    const double difference = static_cast<double>(memory->free_bytes) - static_cast<double>(*available);
    EXPECT_LT(std::abs(difference), 0.25 * static_cast<double>(*available));
    EXPECT_GT(memory->free_bytes, 0u);
}

}  // namespace
}  // namespace parbench

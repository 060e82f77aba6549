// The timed window's page-fault and preemption counters (bench/thread_counters.hpp): read
// from the kernel, differenced, and turned into warnings at their thresholds.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstddef>

#include "bench/thread_counters.hpp"

namespace parbench {
namespace {

bool has_kind(const std::vector<Warning>& warnings, const std::string& kind) {
    for (const Warning& w : warnings)
        if (w.kind == kind) return true;
    return false;
}

// Touching fresh anonymous pages faults each one in: the counters must see them.
TEST(ThreadCounters, CountTheFaultsOfFreshPages) {
    constexpr std::size_t pages = 256;
    constexpr std::size_t page = 4096;
    void* memory = mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(memory, MAP_FAILED);
    const ThreadCounters before = read_thread_counters();
    auto* bytes = static_cast<volatile char*>(memory);
    for (std::size_t p = 0; p < pages; ++p) bytes[p * page] = 1;
    const ThreadCounters after = read_thread_counters();
    munmap(memory, pages * page);
    const ThreadCounters taken = counters_between(before, after);
    // Transparent huge pages could serve them in fewer faults; never more than one each.
    EXPECT_GE(taken.minor_faults + taken.major_faults, 1u);
    EXPECT_LE(taken.minor_faults, pages + 16);
}

TEST(ThreadCounters, WarnAtOneFaultPerCall) {
    const std::vector<ThreadCounters> quiet{{0, 0, 0}, {9, 0, 0}};
    EXPECT_TRUE(thread_counter_warnings(quiet, 10, "call").empty());
    const std::vector<ThreadCounters> faulting{{0, 0, 0}, {81930, 0, 0}};
    const std::vector<Warning> warnings = thread_counter_warnings(faulting, 10, "call");
    ASSERT_TRUE(has_kind(warnings, "page-faults"));
    // Names the worst rank, the rate and the fix.
    EXPECT_NE(warnings.front().text.find("rank 1 took 8193.0 minor"), std::string::npos) << warnings.front().text;
    EXPECT_NE(warnings.front().text.find("glibc.malloc.trim_threshold"), std::string::npos);
    // Major faults count too.
    EXPECT_TRUE(has_kind(thread_counter_warnings({{0, 10, 0}}, 10, "step"), "page-faults"));
}

TEST(ThreadCounters, WarnWhenPreemptedInOneCallInTen) {
    EXPECT_TRUE(thread_counter_warnings({{0, 0, 9}}, 100, "call").empty());
    const std::vector<Warning> warnings = thread_counter_warnings({{0, 0, 1}, {0, 0, 10}}, 100, "call");
    ASSERT_TRUE(has_kind(warnings, "preempted"));
    EXPECT_FALSE(has_kind(warnings, "page-faults"));
    EXPECT_NE(warnings.front().text.find("rank 1 was preempted 0.1 times per call"), std::string::npos)
        << warnings.front().text;
}

TEST(ThreadCounters, NoCallsOrNoRanksNoWarning) {
    EXPECT_TRUE(thread_counter_warnings({{100, 100, 100}}, 0, "call").empty());
    EXPECT_TRUE(thread_counter_warnings({}, 10, "call").empty());
}

TEST(ThreadCounters, JsonHoldsEveryRank) {
    const nlohmann::json json = thread_counters_json({{1, 2, 3}, {4, 5, 6}}, 7, "window");
    EXPECT_EQ(json["calls"], 7);
    EXPECT_EQ(json["minor_faults_by_rank"], nlohmann::json({1, 4}));
    EXPECT_EQ(json["major_faults_by_rank"], nlohmann::json({2, 5}));
    EXPECT_EQ(json["involuntary_switches_by_rank"], nlohmann::json({3, 6}));
}

}  // namespace
}  // namespace parbench

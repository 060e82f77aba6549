// Which pages host buffers are on (device/host_pages.hpp): the flag's values, the kernel's THP
// setting as sysfs writes it, and the read-back of huge pages from smaps text; then the real
// read-back on this machine, against what its THP setting must give (report/environment.hpp
// names the outcome; compare tells reports apart by it).
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "device/cpu_device.hpp"
#include "device/host_pages.hpp"
#include "report/environment.hpp"

namespace parbench {
namespace {

constexpr std::uint64_t mib = 1 << 20;

TEST(HostPages, TheFlagTakesNormalAndHugeOnly) {
    EXPECT_EQ(parse_buffer_pages("normal"), BufferPages::normal);
    EXPECT_EQ(parse_buffer_pages("huge"), BufferPages::huge);
    for (const char* other : {"", "Huge", "thp", "always", "madvise"}) EXPECT_FALSE(parse_buffer_pages(other)) << other;
    for (BufferPages pages : {BufferPages::normal, BufferPages::huge})
        EXPECT_EQ(parse_buffer_pages(buffer_pages_name(pages)), pages);
}

TEST(HostPages, TheSelectedChoiceIsTheBracketedWord) {
    EXPECT_EQ(selected_choice("always [madvise] never"), "madvise");
    EXPECT_EQ(selected_choice("[always] madvise never"), "always");
    EXPECT_EQ(selected_choice("always defer defer+madvise [madvise] never"), "madvise");
    EXPECT_EQ(selected_choice("always madvise never"), "");
    EXPECT_EQ(selected_choice(""), "");
}

class ThpFolder : public ::testing::Test {
  protected:
    void SetUp() override {
        root_ = std::filesystem::temp_directory_path() /
                ("parbench-thp-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(root_ / "hugepages-2048kB");
    }
    void TearDown() override { std::filesystem::remove_all(root_); }
    // The setting read from a folder whose three files hold these lines.
    ThpSetting read(const std::string& enabled, const std::string& defrag, const std::string& size_2048kb) {
        std::ofstream(root_ / "enabled") << enabled << '\n';
        std::ofstream(root_ / "defrag") << defrag << '\n';
        std::ofstream(root_ / "hugepages-2048kB" / "enabled") << size_2048kb << '\n';
        return read_thp_setting(root_.string());
    }
    std::filesystem::path root_;
};

TEST_F(ThpFolder, TheTopLevelSettingHoldsWhereTheHugePageSizeInherits) {
    const ThpSetting setting =
        read("always [madvise] never", "always defer defer+madvise [madvise] never", "always [inherit] madvise never");
    EXPECT_EQ(setting.enabled, "madvise");
    EXPECT_EQ(setting.defrag, "madvise");
}

TEST_F(ThpFolder, AHugePageSizeSetApartOverridesTheTopLevel) {
    const ThpSetting setting =
        read("always [madvise] never", "[always] defer defer+madvise madvise never", "[always] inherit madvise never");
    EXPECT_EQ(setting.enabled, "always");
    EXPECT_EQ(setting.defrag, "always");
}

TEST_F(ThpFolder, AKernelWithoutThpSaysUnavailable) {
    const ThpSetting setting = read_thp_setting((root_ / "absent").string());
    EXPECT_EQ(setting.enabled, "unavailable");
    EXPECT_EQ(setting.defrag, "unavailable");
}

TEST(HostPages, TheCapacityIsTheWholeHugePagesInsideARange) {
    const std::uintptr_t aligned = 64 * transparent_huge_page_bytes;
    EXPECT_EQ(huge_page_capacity(aligned, aligned + 4 * mib), 4 * mib);
    EXPECT_EQ(huge_page_capacity(aligned + 4096, aligned + 4096 + 4 * mib), 2 * mib);
    EXPECT_EQ(huge_page_capacity(aligned + 4096, aligned + 2 * mib + 4095), 0u);
    EXPECT_EQ(huge_page_capacity(aligned, aligned), 0u);
}

// Three mappings as /proc/self/smaps writes them (fields trimmed): the middle one holds 4 MiB
// of huge pages.
constexpr const char* smaps_text =
    "7f0000000000-7f0000200000 rw-p 00000000 00:00 0 \n"
    "Size:               2048 kB\n"
    "AnonHugePages:      2048 kB\n"
    "VmFlags: rd wr mr mw me ac \n"
    "7f0000400000-7f0000a00000 rw-p 00000000 00:00 0 \n"
    "Size:               6144 kB\n"
    "Anonymous:          6144 kB\n"
    "AnonHugePages:      4096 kB\n"
    "VmFlags: rd wr mr mw me ac hg \n"
    "7f0000a00000-7f0000a01000 r--p 00000000 08:01 1234    /usr/lib/libc.so.6\n"
    "Size:                  4 kB\n"
    "AnonHugePages:         0 kB\n";

TEST(HostPages, TheHugeBytesOfARangeComeFromTheMappingsItOverlaps) {
    const std::uintptr_t base = 0x7f0000000000;
    EXPECT_EQ(huge_bytes_in_range(smaps_text, base + 4 * mib, base + 10 * mib), 4 * mib);  // the middle one exactly
    EXPECT_EQ(huge_bytes_in_range(smaps_text, base, base + 10 * mib + 4096), 6 * mib);     // all three
    EXPECT_EQ(huge_bytes_in_range(smaps_text, base + 2 * mib, base + 4 * mib), 0u);        // the gap between
    // A range that shares a mapping is credited at most its overlap with it.
    EXPECT_EQ(huge_bytes_in_range(smaps_text, base + 4 * mib, base + 5 * mib), 1 * mib);
    EXPECT_EQ(huge_bytes_in_range("", base, base + mib), 0u);
}

TEST(HostPages, AMappingThatRefusesHugePagesReadsBackNone) {
    const std::size_t bytes = 8 * mib;  // a fresh mapping, never faulted in before
    void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(data, MAP_FAILED);
    ASSERT_EQ(madvise(data, bytes, MADV_NOHUGEPAGE), 0) << "madvise(MADV_NOHUGEPAGE)";
    std::memset(data, 1, bytes);
    const auto huge = huge_bytes_of(data, bytes);
    munmap(data, bytes);
    ASSERT_TRUE(huge) << "/proc/self/smaps unreadable";
    EXPECT_EQ(*huge, 0u);
}

// What the kernel's setting promises a probe: under "madvise" (Debian's default) and "never", a
// plain allocation stays on 4 KiB pages; asking for huge pages gets them under "madvise" and
// "always" (defrag lets the kernel compact for a madvised range), none under "never".
TEST(HostPages, TheReadBackFollowsTheKernelsSetting) {
    const ThpSetting thp = read_thp_setting();
    // Large buffers allocated and freed first, as a sweep does: glibc then serves sizes up to the
    // largest freed from its heap, memory it may have faulted in already (on 4 KiB pages, or on
    // huge ones a madvise left behind). The probes must still read what each policy gets.
    for (BufferPages pages : {BufferPages::huge, BufferPages::normal, BufferPages::huge})
        for (const std::size_t bytes : {6 * mib, 4 * mib, 8 * mib}) CpuDevice(pages).allocate(bytes);
    const auto normal = CpuDevice(BufferPages::normal).read_back_pages();
    const auto huge = CpuDevice(BufferPages::huge).read_back_pages();
    ASSERT_TRUE(normal && huge);
    ASSERT_TRUE(normal->probe_huge_bytes && huge->probe_huge_bytes) << "/proc/self/smaps unreadable";
    EXPECT_EQ(normal->requested, BufferPages::normal);
    EXPECT_EQ(huge->requested, BufferPages::huge);
    EXPECT_EQ(huge->probe_huge_capacity, huge->probe_bytes) << "a huge probe starts on a huge page";
    EXPECT_LE(*normal->probe_huge_bytes, normal->probe_bytes);
    if (thp.enabled == "madvise" || thp.enabled == "never" || thp.enabled == "unavailable") {
        EXPECT_EQ(*normal->probe_huge_bytes, 0u) << "THP " << thp.enabled;
    }
    if (thp.enabled == "madvise" || thp.enabled == "always") {
        EXPECT_GT(*huge->probe_huge_bytes, 0u) << "THP " << thp.enabled << ", defrag " << thp.defrag;
    } else {
        EXPECT_EQ(*huge->probe_huge_bytes, 0u) << "THP " << thp.enabled;
    }
    std::cout << "THP " << thp.enabled << " (defrag " << thp.defrag << "): normal probe " << *normal->probe_huge_bytes
              << " B on huge pages, huge probe " << *huge->probe_huge_bytes << " of " << huge->probe_bytes << " B\n";
}

BufferPagesRecord record(const std::string& requested, std::vector<std::optional<std::uint64_t>> huge) {
    BufferPagesRecord r;
    r.requested = requested;
    r.thp_enabled_by_rank.assign(huge.size(), "madvise");
    r.thp_defrag_by_rank.assign(huge.size(), "madvise");
    r.probe_bytes = 4 * mib;
    r.probe_huge_capacity_by_rank.assign(huge.size(), 2 * mib);
    r.probe_huge_bytes_by_rank = std::move(huge);
    return r;
}

TEST(BufferPagesRecord, WhatTheBuffersGotIsJudgedOverEveryRank) {
    EXPECT_EQ(obtained_pages(record("normal", {0, 0})), "normal");
    EXPECT_EQ(obtained_pages(record("huge", {2 * mib, 4 * mib})), "huge");
    EXPECT_EQ(obtained_pages(record("huge", {2 * mib, 0})), "partly huge");
    EXPECT_EQ(obtained_pages(record("huge", {std::uint64_t{1} * mib})), "partly huge");
    EXPECT_EQ(obtained_pages(record("normal", {0, std::nullopt})), "unknown");
    EXPECT_EQ(obtained_pages(BufferPagesRecord{}), "device memory");
}

TEST(BufferPagesRecord, TheHeaderLineSaysWhatWasAskedTheSettingAndWhatWasObtained) {
    const nlohmann::json json = to_json(record("huge", {2 * mib, 2 * mib}));
    EXPECT_EQ(json["requested"], "huge");
    EXPECT_EQ(json["obtained"], "huge");
    EXPECT_EQ(json["thp_enabled"], "madvise");
    EXPECT_EQ(buffer_pages_line(json),
              "# buffer pages: huge (madvise from 2 MiB; THP madvise, defrag madvise); obtained huge (a 4 MiB probe: 2 "
              "MiB on huge pages of 2 MiB they could back)");
    BufferPagesRecord spread = record("huge", {2 * mib, 4 * mib});
    spread.probe_huge_capacity_by_rank = {2 * mib, 4 * mib};
    EXPECT_EQ(buffer_pages_line(to_json(spread)),
              "# buffer pages: huge (madvise from 2 MiB; THP madvise, defrag madvise); obtained huge (a 4 MiB probe: "
              "2-4 MiB on huge pages of 2-4 MiB they could back)");
    BufferPagesRecord mixed = record("normal", {0});
    mixed.thp_enabled_by_rank = {"always"};
    mixed.thp_enabled_by_rank.push_back("madvise");
    mixed.probe_huge_bytes_by_rank.push_back(0);
    mixed.probe_huge_capacity_by_rank.push_back(2 * mib);
    EXPECT_EQ(to_json(mixed)["thp_enabled"], "mixed");
    const nlohmann::json gpu = to_json(BufferPagesRecord{{}, {"madvise"}, {"madvise"}, 0, {}, {}});
    EXPECT_TRUE(gpu["requested"].is_null());
    EXPECT_EQ(buffer_pages_line(gpu),
              "# buffer pages: GPU memory (--buffer-pages applies to host buffers only); host THP madvise, defrag madvise");
    EXPECT_EQ(buffer_pages_line(nlohmann::json()), "");
}

}  // namespace
}  // namespace parbench

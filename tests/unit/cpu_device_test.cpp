// CpuDevice's buffers: zeroed at allocation (first touch outside any timed region), on a page
// boundary; under BufferPages::huge, from one transparent huge page up on a huge-page boundary,
// where the kernel can back them with huge pages (CpuDevice asks for them with madvise).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "device/cpu_device.hpp"

namespace parbench {
namespace {

constexpr std::size_t page_bytes = 4096;
constexpr std::size_t huge_page_bytes = transparent_huge_page_bytes;

std::uintptr_t address(const Buffer& buffer) { return reinterpret_cast<std::uintptr_t>(buffer.data()); }

bool all_zero(const Buffer& buffer) {
    const auto* bytes = buffer.as<unsigned char>();
    return std::all_of(bytes, bytes + buffer.bytes(), [](unsigned char b) { return b == 0; });
}

TEST(CpuDevice, ABufferIsZeroedOnAPageBoundaryUnderEitherPolicy) {
    for (BufferPages pages : {BufferPages::normal, BufferPages::huge}) {
        CpuDevice device(pages);
        for (const std::size_t bytes : {std::size_t{1}, huge_page_bytes - 1, 3 * huge_page_bytes + 5}) {
            const Buffer buffer = device.allocate(bytes);
            EXPECT_EQ(address(buffer) % page_bytes, 0u) << buffer_pages_name(pages) << ' ' << bytes << " bytes";
            EXPECT_EQ(buffer.bytes(), bytes);
            EXPECT_TRUE(all_zero(buffer)) << buffer_pages_name(pages) << ' ' << bytes << " bytes";
        }
    }
}

TEST(CpuDevice, UnderHugePagesABufferOfAHugePageOrMoreStartsOnAHugePageBoundary) {
    CpuDevice device(BufferPages::huge);
    for (const std::size_t bytes : {huge_page_bytes, huge_page_bytes + 3 * page_bytes + 5, 5 * huge_page_bytes}) {
        const Buffer buffer = device.allocate(bytes);
        EXPECT_EQ(address(buffer) % huge_page_bytes, 0u) << bytes << " bytes";
    }
}

}  // namespace
}  // namespace parbench

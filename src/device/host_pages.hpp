// Which pages host buffers are on. The same MPI loop runs 1.5x faster at 16 MiB with its buffers
// on transparent huge pages (THP) on this project's VM, so a host figure depends on them: this
// file holds the policy a run asks for (--buffer-pages), the kernel's THP setting that decides
// what a plain allocation gets, and a read-back of what a buffer actually got (/proc/self/smaps),
// so that a report says what it was measured on rather than what was meant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace parbench {

// normal: a plain page-aligned allocation without madvise, what a user's own program gets (and
// IMB-MPI1, OSU and PyTorch's CPU allocator by default): the kernel's THP setting decides, so
// with "madvise" (Debian's default) the buffers are on 4 KiB pages, with "always" on huge pages.
// huge: buffers of one huge page or more start on a huge-page boundary and ask for huge pages
// (madvise MADV_HUGEPAGE), which "madvise" and "always" both grant when memory allows.
enum class BufferPages { normal, huge };

// "normal" or "huge"; nullopt otherwise.
std::optional<BufferPages> parse_buffer_pages(std::string_view text);
std::string buffer_pages_name(BufferPages pages);

// A transparent huge page on x86-64 (a PMD: 2 MiB).
inline constexpr std::size_t transparent_huge_page_bytes = std::size_t{2} << 20;

// The kernel's THP setting for 2 MiB pages (Documentation/admin-guide/mm/transhuge.rst).
struct ThpSetting {
    std::string enabled;  // always, madvise or never; "unavailable" when the kernel has no THP
    std::string defrag;   // always, defer, defer+madvise, madvise or never; "unavailable" likewise
};

// <root>/enabled and <root>/defrag; where the kernel has per-size settings and the 2 MiB size's
// (<root>/hugepages-2048kB/enabled) is not "inherit", that one is what 2 MiB pages get.
ThpSetting read_thp_setting(const std::string& root = "/sys/kernel/mm/transparent_hugepage");

// The bracketed word of a sysfs choice ("always [madvise] never" -> "madvise"); "" without one.
std::string selected_choice(std::string_view line);

// The bytes of [begin, end) that whole huge pages could back: the 2 MiB-aligned pieces inside it.
std::uint64_t huge_page_capacity(std::uintptr_t begin, std::uintptr_t end);

// From the text of /proc/<pid>/smaps: the AnonHugePages of the mappings that overlap [begin,
// end), each counted up to its overlap. A buffer that shares its mapping with a neighbour (the
// kernel merges adjacent anonymous mappings) may be credited the neighbour's huge pages, never
// more than its own size; a buffer that asked for huge pages has a mapping of its own (madvise
// splits it off), so its count is exact.
std::uint64_t huge_bytes_in_range(std::string_view smaps, std::uintptr_t begin, std::uintptr_t end);

// The same, read now from this process's /proc/self/smaps; nullopt when it cannot be read.
std::optional<std::uint64_t> huge_bytes_of(const void* data, std::size_t bytes);

}  // namespace parbench

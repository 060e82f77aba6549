#include "device/cpu_device.hpp"

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>

#include <sys/mman.h>

#include "core/allocation_failure.hpp"
#include "core/error.hpp"
#include "core/memory_budget.hpp"

namespace parbench {
namespace {

constexpr std::size_t page_bytes = 4096;
// Big enough to hold a whole huge page wherever a page-aligned allocation lands, small enough
// that touching it costs a few ms even on 4 KiB pages (about 12 us each on this project's VMs).
constexpr std::size_t probe_bytes = std::size_t{4} << 20;

// A fresh mapping of whole huge pages, starting on one, that asks the kernel for huge pages
// (where THP is set to "madvise", Debian's default, it gives them only when asked): one TLB
// entry and one first-touch fault per 2 MiB instead of 512. On the Zen 3 VM, mlp-deep's step
// (parameters, moments and activations far beyond L2's TLB reach) went from 42.5 to 41.6 ms
// with them. Its own mapping, not glibc's: once glibc's mmap threshold has grown past a size
// (it does when a buffer that large is freed) it hands out heap memory instead, possibly
// already faulted in on 4 KiB pages, which madvise does not turn into huge pages (only
// khugepaged, later, may); the read-back found exactly that in a process that had freed
// buffers before.
std::shared_ptr<void> allocate_huge(std::size_t rounded) {
    const std::size_t span = rounded + transparent_huge_page_bytes;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        throw AllocationFailure("mmap(" + std::to_string(span) + " bytes) failed: " + std::strerror(errno) +
                             " (out of host memory?)");
    // Unmap the ends so that the buffer starts on a huge page.
    const auto base = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t begin = (base + transparent_huge_page_bytes - 1) / transparent_huge_page_bytes *
                                 transparent_huge_page_bytes;
    if (begin > base) ::munmap(raw, begin - base);
    if (base + span > begin + rounded) ::munmap(reinterpret_cast<void*>(begin + rounded), base + span - begin - rounded);
    void* data = reinterpret_cast<void*>(begin);
    // A hint: where THP is off or absent madvise fails and the buffer keeps 4 KiB pages, which
    // the read-back (read_back_pages) then reports.
    (void)madvise(data, rounded, MADV_HUGEPAGE);
    return std::shared_ptr<void>(data, [rounded](void* p) { ::munmap(p, rounded); });
}

// Zeroed, page-aligned host memory. Under BufferPages::normal, or below one huge page, it is
// what a program gets from its allocator (glibc's mmap or heap, which pages the kernel's THP
// setting decides); under BufferPages::huge, from one huge page up, allocate_huge's.
std::shared_ptr<void> allocate_host(std::size_t bytes, BufferPages pages) {
    const std::size_t rounded = ((bytes == 0 ? 1 : bytes) + page_bytes - 1) / page_bytes * page_bytes;
    std::shared_ptr<void> owner;
    if (pages == BufferPages::huge && rounded >= transparent_huge_page_bytes) {
        owner = allocate_huge(rounded);
    } else {
        void* data = std::aligned_alloc(page_bytes, rounded);
        if (data == nullptr)
            throw AllocationFailure("aligned_alloc(" + std::to_string(rounded) + " bytes) failed: out of host memory");
        owner = std::shared_ptr<void>(data, std::free);
    }
    std::memset(owner.get(), 0, rounded);  // first touch here, never inside a timed region
    return owner;
}

class SteadyClockTimer : public Timer {
  public:
    void start() override { start_ = std::chrono::steady_clock::now(); }
    void stop() override { stop_ = std::chrono::steady_clock::now(); }
    double elapsed_us() override { return std::chrono::duration<double, std::micro>(stop_ - start_).count(); }

  private:
    std::chrono::steady_clock::time_point start_{};
    std::chrono::steady_clock::time_point stop_{};
};

}  // namespace

std::string cpu_model_name() {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("model name", 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon != std::string::npos) return line.substr(colon + 2);
    }
    return "unknown cpu";
}

std::string CpuDevice::name() const { return cpu_model_name(); }

Buffer CpuDevice::allocate(std::size_t bytes) {
    std::shared_ptr<void> owner = allocate_host(bytes, pages_);
    void* data = owner.get();  // before the move: the order arguments are evaluated in is unspecified
    return Buffer(data, bytes, std::move(owner));
}

std::optional<PageReadBack> CpuDevice::read_back_pages() const {
    const std::shared_ptr<void> probe = allocate_host(probe_bytes, pages_);
    const auto begin = reinterpret_cast<std::uintptr_t>(probe.get());
    return PageReadBack{pages_, read_thp_setting(), probe_bytes, huge_page_capacity(begin, begin + probe_bytes),
                        huge_bytes_of(probe.get(), probe_bytes)};
}

void CpuDevice::copy_to_host(void* host, const Buffer& source, std::size_t bytes) const {
    std::memcpy(host, source.data(), bytes);
}

void CpuDevice::copy_from_host(Buffer& target, const void* host, std::size_t bytes) const {
    std::memcpy(target.data(), host, bytes);
}

void CpuDevice::copy(Buffer& target, std::size_t target_offset, const Buffer& source, std::size_t source_offset,
                     std::size_t bytes) const {
    std::memmove(target.as<char>() + target_offset, source.as<char>() + source_offset, bytes);
}

void CpuDevice::fill_zero(Buffer& target) const { std::memset(target.data(), 0, target.bytes()); }

std::unique_ptr<Timer> CpuDevice::make_timer() const { return std::make_unique<SteadyClockTimer>(); }

std::optional<DeviceMemory> CpuDevice::free_memory() const {
    const auto available = host_memory_available();
    if (!available) return std::nullopt;
    return DeviceMemory{*available, "MemAvailable", "host", true};
}

void CpuDevice::fill_input(Buffer& target, std::size_t offset_elements, std::size_t count, DType type,
                           const InputPattern& pattern) const {
    void* base = target.as<char>() + offset_elements * dtype_size(type);
    for (std::size_t i = 0; i < count; ++i) store_element(base, i, type, input_value(pattern, pattern.rank, i));
}

std::size_t CpuDevice::count_wrong(const Buffer& result, std::size_t offset_elements, std::size_t count, DType type,
                                   const ExpectedLayout& layout) const {
    const void* base = result.as<char>() + offset_elements * dtype_size(type);
    std::size_t wrong = 0;
    for (std::size_t k = 0; k < count; ++k)
        if (!element_matches(layout, load_element(base, k, type), k, type)) ++wrong;
    return wrong;
}

}  // namespace parbench

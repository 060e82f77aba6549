#include "device/cpu_device.hpp"

#include <chrono>
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
// Buffers of at least one transparent huge page start on one and ask the kernel for huge pages
// (where THP is set to "madvise", Debian's default, it gives them only when asked): one TLB
// entry and one first-touch fault per 2 MiB instead of 512. On the Zen 3 VM, mlp-deep's step
// (parameters, moments and activations far beyond L2's TLB reach) went from 42.5 to 41.6 ms.
constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

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
    const std::size_t rounded = ((bytes == 0 ? 1 : bytes) + page_bytes - 1) / page_bytes * page_bytes;
    const bool huge = rounded >= huge_page_bytes;
    void* data = std::aligned_alloc(huge ? huge_page_bytes : page_bytes, rounded);
    if (data == nullptr)
        throw AllocationFailure("aligned_alloc(" + std::to_string(rounded) + " bytes) failed: out of host memory");
    // A hint: where THP is off or absent madvise fails and the buffer keeps 4 KiB pages, as before.
    if (huge) (void)madvise(data, rounded, MADV_HUGEPAGE);
    std::memset(data, 0, rounded);  // first touch here, never inside a timed region
    return Buffer(data, bytes, std::shared_ptr<void>(data, std::free));
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

// Every device allocation of the training engine goes through a ledger that tags it with
// what it holds, so the report's memory figures are the bytes actually allocated (live and
// peak per category), not a formula. Buffers release their bytes when they go away.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "device/device.hpp"
#include "theory/memory_category.hpp"

namespace parbench {

struct MemoryUsage {
    std::array<std::size_t, memory_category_count> live{};
    std::array<std::size_t, memory_category_count> peak{};
    std::size_t total_live = 0;
    std::size_t total_peak = 0;  // peak of the sum, not the sum of the peaks
    std::size_t peak_of(MemoryCategory category) const { return peak[static_cast<std::size_t>(category)]; }
    std::size_t live_of(MemoryCategory category) const { return live[static_cast<std::size_t>(category)]; }
};

namespace detail {
struct LedgerCounts;
}

class MemoryLedger {
  public:
    explicit MemoryLedger(Device& device);
    // A buffer of `bytes` from the device, counted under `category` until it is destroyed.
    Buffer allocate(MemoryCategory category, std::size_t bytes);
    MemoryUsage usage() const;
    Device& device() const { return device_; }

  private:
    Device& device_;
    std::shared_ptr<detail::LedgerCounts> counts_;  // shared with the buffers, which may outlive the ledger
};

}  // namespace parbench

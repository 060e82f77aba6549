#include "train/memory_ledger.hpp"

#include <algorithm>

namespace parbench {

namespace detail {

struct LedgerCounts {
    MemoryUsage usage;
    void add(MemoryCategory category, std::size_t bytes) {
        const auto index = static_cast<std::size_t>(category);
        usage.live[index] += bytes;
        usage.peak[index] = std::max(usage.peak[index], usage.live[index]);
        usage.total_live += bytes;
        usage.total_peak = std::max(usage.total_peak, usage.total_live);
    }
    void remove(MemoryCategory category, std::size_t bytes) {
        usage.live[static_cast<std::size_t>(category)] -= bytes;
        usage.total_live -= bytes;
    }
};

}  // namespace detail

namespace {

// Keeps the device's buffer alive and gives its bytes back to the ledger when released.
class CountedAllocation {
  public:
    CountedAllocation(Buffer buffer, std::shared_ptr<detail::LedgerCounts> counts, MemoryCategory category)
        : buffer_(std::move(buffer)), counts_(std::move(counts)), category_(category) {
        counts_->add(category_, buffer_.bytes());
    }
    ~CountedAllocation() { counts_->remove(category_, buffer_.bytes()); }
    CountedAllocation(const CountedAllocation&) = delete;
    CountedAllocation& operator=(const CountedAllocation&) = delete;

  private:
    Buffer buffer_;
    std::shared_ptr<detail::LedgerCounts> counts_;
    MemoryCategory category_;
};

}  // namespace


MemoryLedger::MemoryLedger(Device& device) : device_(device), counts_(std::make_shared<detail::LedgerCounts>()) {}

Buffer MemoryLedger::allocate(MemoryCategory category, std::size_t bytes) {
    Buffer buffer = device_.allocate(bytes);
    void* data = buffer.data();
    auto allocation = std::make_shared<CountedAllocation>(std::move(buffer), counts_, category);
    return Buffer(data, bytes, std::move(allocation));
}

MemoryUsage MemoryLedger::usage() const { return counts_->usage; }

}  // namespace parbench

#include "core/poll_registry.hpp"

#include <algorithm>
#include <utility>

namespace parbench {

PollRegistry::Entry::Entry(PollRegistry& registry, std::function<void()> poll)
    : registry_(registry), poll_(std::move(poll)) {
    registry_.entries_.push_back(this);
}

PollRegistry::Entry::~Entry() {
    // Paired passes wait in any order: not necessarily the last one registered.
    auto& entries = registry_.entries_;
    entries.erase(std::find(entries.begin(), entries.end(), this));
}

void PollRegistry::poll_all() const {
    for (const Entry* entry : entries_) entry->poll_();
}

}  // namespace parbench

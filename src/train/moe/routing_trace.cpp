#include "train/moe/routing_trace.hpp"

#include <stdexcept>

namespace parbench {

void RoutingTrace::record(const RoutingKey& key, std::vector<int> chosen) { groups_[key] = std::move(chosen); }

// Packed as int64s, per group: layer, first sample, count, then the count experts.
void RoutingTrace::gather(Communicator& control) {
    if (control.rank() != 0) {
        std::vector<std::int64_t> packed;
        for (const auto& [key, chosen] : groups_) {
            packed.insert(packed.end(), {key.layer, static_cast<std::int64_t>(key.first_sample),
                                         static_cast<std::int64_t>(chosen.size())});
            packed.insert(packed.end(), chosen.begin(), chosen.end());
        }
        std::uint64_t count = packed.size();
        control.send(&count, 1, DType::uint64, 0);
        if (count > 0) control.send(packed.data(), packed.size(), DType::int64, 0);
        groups_.clear();
        return;
    }
    for (int rank = 1; rank < control.size(); ++rank) {
        std::uint64_t count = 0;
        control.recv(&count, 1, DType::uint64, rank);
        std::vector<std::int64_t> packed(count);
        if (count > 0) control.recv(packed.data(), count, DType::int64, rank);
        for (std::size_t i = 0; i + 3 <= packed.size();) {
            const RoutingKey key{static_cast<int>(packed[i]), static_cast<std::uint64_t>(packed[i + 1])};
            const auto n = static_cast<std::size_t>(packed[i + 2]);
            std::vector<int> chosen(packed.begin() + static_cast<std::ptrdiff_t>(i + 3),
                                    packed.begin() + static_cast<std::ptrdiff_t>(i + 3 + n));
            groups_.emplace(key, std::move(chosen));
            i += 3 + n;
        }
    }
}

const std::vector<int>& RoutingTrace::decisions(const RoutingKey& key) const {
    const auto found = groups_.find(key);
    if (found == groups_.end())
        throw std::logic_error("--check: the parallel run recorded no routing for MoE layer " +
                               std::to_string(key.layer) + " at sample " + std::to_string(key.first_sample));
    return found->second;
}

void RoutingTrace::followed(const RoutingKey& key, int tokens, const std::vector<GroupFlip>& flips) {
    decisions_followed_ += static_cast<std::uint64_t>(tokens);
    for (const GroupFlip& flip : flips) {
        const auto sample = key.first_sample + static_cast<std::uint64_t>(flip.token / tokens_per_sample_);
        flips_.push_back(RoutingFlip{key.layer, sample, flip.token % tokens_per_sample_, flip.margin});
    }
}

RoutingComparison RoutingTrace::comparison(double near_tie) const {
    RoutingComparison comparison;
    comparison.followed = true;
    comparison.decisions = decisions_followed_;
    comparison.flips = flips_;
    comparison.near_tie = near_tie;
    return comparison;
}

}  // namespace parbench

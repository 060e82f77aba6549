// --check of an MoE model separates routing from arithmetic (train/reference_check.hpp): the
// parallel run records what every routing group decided, rank 0 gathers it, and the serial
// reference takes those decisions instead of its own, noting each token whose own top-k would
// have differed and by what margin. A group is keyed by its MoE layer and the global index of
// its micro-batch's first sample, which the reference's groups share with the run's wherever a
// group is a whole micro-batch of one rank (data, expert, tensor and pipeline parallelism). Under
// sequence or context parallelism a rank routes a slice of the micro-batch's tokens: those runs
// are not recorded, and the check says the reference routed on its own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "train/reference_check.hpp"

namespace parbench {

struct RoutingKey {
    int layer = 0;
    std::uint64_t first_sample = 0;
    auto operator<=>(const RoutingKey&) const = default;
};

// One token of a group whose own choice differed from the decision it was given.
struct GroupFlip {
    int token = 0;
    double margin = 0.0;
};

class RoutingTrace {
  public:
    // `tokens_per_sample`: the sequence length (the rows of one sample in a group).
    explicit RoutingTrace(int tokens_per_sample) : tokens_per_sample_(tokens_per_sample) {}

    // The parallel run: a group's decisions, (N, k) experts in choice order.
    void record(const RoutingKey& key, std::vector<int> chosen);
    // Rank 0 gets every rank's records (collective over `control`); tensor-parallel ranks route
    // the same group alike, and the first copy is kept.
    void gather(Communicator& control);

    // The reference: the decisions to take for a group (a logic_error when the run made none:
    // the groups of the two runs differ).
    const std::vector<int>& decisions(const RoutingKey& key) const;
    // ... and what following them found: `tokens` decisions, `flips` among them.
    void followed(const RoutingKey& key, int tokens, const std::vector<GroupFlip>& flips);
    RoutingComparison comparison(double near_tie) const;

  private:
    int tokens_per_sample_;
    std::map<RoutingKey, std::vector<int>> groups_;
    std::uint64_t decisions_followed_ = 0;
    std::vector<RoutingFlip> flips_;
};

}  // namespace parbench

// What a pass suspended on a non-blocking exchange has in flight, for the code that runs in
// the meantime to poll. Under --moe-a2a-overlap-1f1b (train/pipeline/pipeline_executor.cpp) a
// pass posts an MoE all-to-all and hands the thread to its partner pass (core/fiber_pair.hpp);
// Open MPI moves a non-blocking exchange on only inside MPI calls, so an exchange nobody tests
// waits for its owner's wait() however long the partner computes. The owner registers a poll of
// it here for as long as it is suspended, and the partner calls poll_all() at cheap points of its
// compute (train/moe/moe_layer.cpp: between the expert FFNs' matmuls).
//
// Registrations are RAII (an Entry is registered from its construction to its destruction, on the
// owner's stack, the fiber's own), so a pass's exchange cannot be polled after the pass waited for
// it and left the scope. The registry belongs to whoever the paired passes share (the MoE layer):
// no global state. Polls run on the calling thread, one after the other, oldest first; a poll
// must not register or unregister entries.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace parbench {

class PollRegistry {
  public:
    class Entry {
      public:
        // Registers `poll` in `registry` until this Entry is destroyed.
        Entry(PollRegistry& registry, std::function<void()> poll);
        ~Entry();
        Entry(const Entry&) = delete;
        Entry& operator=(const Entry&) = delete;

      private:
        friend class PollRegistry;
        PollRegistry& registry_;
        std::function<void()> poll_;
    };

    PollRegistry() = default;
    PollRegistry(const PollRegistry&) = delete;
    PollRegistry& operator=(const PollRegistry&) = delete;

    // Runs every registered poll once, oldest registration first.
    void poll_all() const;
    std::size_t size() const { return entries_.size(); }

  private:
    std::vector<const Entry*> entries_;
};

}  // namespace parbench

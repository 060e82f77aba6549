// core/poll_registry.hpp: a registered poll runs at every poll_all() until its Entry is
// destroyed, oldest first, whatever order entries leave in; and the use it is made for, a pass
// suspended on a fiber (core/fiber_pair.hpp) whose non-blocking request its partner fiber polls
// to completion while it runs, so the owner's wait() finds nothing left to wait for.
#include "core/poll_registry.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "core/fiber_pair.hpp"

namespace parbench {
namespace {

TEST(PollRegistry, PollsTheLiveEntriesOldestFirst) {
    PollRegistry registry;
    std::string log;
    registry.poll_all();  // nothing registered: nothing to do
    auto a = std::make_unique<PollRegistry::Entry>(registry, [&] { log += "a"; });
    {
        PollRegistry::Entry b(registry, [&] { log += "b"; });
        auto c = std::make_unique<PollRegistry::Entry>(registry, [&] { log += "c"; });
        registry.poll_all();
        EXPECT_EQ(log, "abc");
        a.reset();  // not the newest: paired passes wait in either order
        registry.poll_all();
        EXPECT_EQ(log, "abcbc");
        EXPECT_EQ(registry.size(), 2u);
    }
    EXPECT_EQ(registry.size(), 0u);
    registry.poll_all();
    EXPECT_EQ(log, "abcbc");
}

// A non-blocking request that completes at its `tests_to_complete`-th test(), as an MPI
// exchange that moves on only inside MPI calls; wait() would block, so the test counts them.
class ProgressedByTests final : public Request::Impl {
  public:
    ProgressedByTests(int tests_to_complete, int& tests, int& waits)
        : remaining_(tests_to_complete), tests_(tests), waits_(waits) {}
    void wait() override { ++waits_; }
    bool test() override {
        ++tests_;
        return --remaining_ <= 0;
    }

  private:
    int remaining_;
    int& tests_;
    int& waits_;
};

// What the owner of an exchange saw: its request's tests and waits, and whether it had
// completed by the time the owner came back to wait for it.
struct OwnerSaw {
    int tests = 0;
    int waits = 0;
    bool done_before_wait = false;
};

// One fiber is a pass that posts an exchange (complete at its third test), registers its poll in
// `in_flight` and hands the thread to `partner`, the other fiber; back, it waits for it.
OwnerSaw run_suspended_exchange(PollRegistry& in_flight, const std::function<void()>& partner) {
    FiberPair fibers(256 * 1024);
    OwnerSaw saw;
    fibers.run(
        [&] {
            Request request(std::make_unique<ProgressedByTests>(3, saw.tests, saw.waits));
            {
                PollRegistry::Entry polled(in_flight, [&] {
                    if (request.pending()) request.test();
                });
                fibers.yield();
            }
            saw.done_before_wait = !request.pending();
            request.wait();
        },
        partner);
    return saw;
}

TEST(PollRegistry, PartnerFiberCompletesTheSuspendedPassesExchange) {
    PollRegistry in_flight;
    std::size_t registered_while_partner_ran = 0;
    const OwnerSaw saw = run_suspended_exchange(in_flight, [&] {
        // The partner computes, polling between its steps (the expert matmuls).
        registered_while_partner_ran = in_flight.size();
        for (int step = 0; step < 5; ++step) in_flight.poll_all();
    });
    EXPECT_EQ(registered_while_partner_ran, 1u);
    EXPECT_TRUE(saw.done_before_wait);
    EXPECT_EQ(saw.tests, 3);  // tested until it completed, never after
    EXPECT_EQ(saw.waits, 0);  // its wait() had nothing left to wait for
    EXPECT_EQ(in_flight.size(), 0u);
}

TEST(PollRegistry, AnUnpolledExchangeIsLeftToItsWait) {
    // The path before polling: the partner never tests it, so the owner's wait() blocks on it.
    PollRegistry in_flight;
    const OwnerSaw saw = run_suspended_exchange(in_flight, [] {});
    EXPECT_FALSE(saw.done_before_wait);
    EXPECT_EQ(saw.tests, 0);
    EXPECT_EQ(saw.waits, 1);
}

}  // namespace
}  // namespace parbench

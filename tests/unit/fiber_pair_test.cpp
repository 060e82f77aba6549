// core/fiber_pair.hpp: the alternation is fixed (first until its yield, then second until its
// yield, ...), a fiber that ends leaves the other to run through its yields, exceptions come out
// of run(), and the stacks are reused by later runs.
#include "core/fiber_pair.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace parbench {
namespace {

TEST(FiberPair, AlternatesAtEachYieldInAFixedOrder) {
    FiberPair pair(64 * 1024);
    std::string log;
    pair.run(
        [&] {
            log += "a1 ";
            pair.yield();
            log += "a2 ";
            pair.yield();
            log += "a3 ";
        },
        [&] {
            log += "b1 ";
            pair.yield();
            log += "b2 ";
        });
    // After b ends, a's second yield returns at once.
    EXPECT_EQ(log, "a1 b1 a2 b2 a3 ");
    EXPECT_EQ(pair.switches(), 3);
    EXPECT_EQ(pair.current(), -1);
}

TEST(FiberPair, StacksAreReusedAndEachFiberKeepsItsLocals) {
    FiberPair pair(64 * 1024);
    for (int round = 0; round < 3; ++round) {
        long sum_first = 0, sum_second = 0;
        auto count = [&](long& sum, long step) {
            long local = 0;  // lives on the fiber's own stack across the switches
            for (int i = 0; i < 5; ++i) {
                local += step;
                pair.yield();
            }
            sum = local;
        };
        pair.run([&] { count(sum_first, 1); }, [&] { count(sum_second, 100 + round); });
        EXPECT_EQ(sum_first, 5);
        EXPECT_EQ(sum_second, 5 * (100 + round));
    }
}

TEST(FiberPair, YieldOutsideRunReturns) {
    FiberPair pair(64 * 1024);
    pair.yield();
    EXPECT_EQ(pair.current(), -1);
}

TEST(FiberPair, ExceptionInAFiberIsRethrownByRun) {
    FiberPair pair(64 * 1024);
    EXPECT_THROW(pair.run([&] { pair.yield(); }, [] { throw std::runtime_error("from the second fiber"); }),
                 std::runtime_error);
    // The pair runs again afterwards.
    int ran = 0;
    pair.run([&] { ++ran; }, [&] { ++ran; });
    EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace parbench

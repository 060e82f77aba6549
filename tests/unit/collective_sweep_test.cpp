#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/collective_sweep.hpp"

namespace parbench {
namespace {

// The rows of nccl-tests' table: each sweep, each collective, each of its cases, each size, out of
// place before in place; a row ends after both its halves.
TEST(CollectiveSweep, PointsInTableOrder) {
    const Collective* const collectives[] = {find_collective("allreduce"), find_collective("allgather")};
    std::vector<std::string> seen;
    SweepSteps steps;
    steps.cases = [](const Collective& c) {
        CollectiveParams a, b;
        b.root = 1;
        return c.name() == "allreduce" ? std::vector<CollectiveParams>{a, b} : std::vector<CollectiveParams>{a};
    };
    steps.begin_collective = [&](const Collective& c, int sweep) {
        seen.push_back("begin " + std::string(c.name()) + " sweep " + std::to_string(sweep));
    };
    steps.measure = [&](const SweepPoint& p) {
        seen.push_back(std::string(p.collective->name()) + " case " + std::to_string(p.params->root) + ' ' +
                       std::to_string(p.requested_bytes) + (p.inplace ? " in" : " out"));
    };
    steps.end_row = [&] { seen.push_back("row"); };
    run_sweep(collectives, {8, 16}, {true, true}, 1, steps);
    const std::vector<std::string> expected = {
        "begin allreduce sweep 1", "allreduce case 0 8 out",  "allreduce case 0 8 in",  "row",
        "allreduce case 0 16 out", "allreduce case 0 16 in",  "row",                    "allreduce case 1 8 out",
        "allreduce case 1 8 in",   "row",                     "allreduce case 1 16 out", "allreduce case 1 16 in",
        "row",                     "begin allgather sweep 1", "allgather case 0 8 out",  "allgather case 0 8 in",
        "row",                     "allgather case 0 16 out", "allgather case 0 16 in",  "row"};
    EXPECT_EQ(seen, expected);
    seen.clear();
    run_sweep(std::span(collectives + 1, 1), {8}, {false, true}, 2, steps);
    EXPECT_EQ(seen, (std::vector<std::string>{"begin allgather sweep 1", "allgather case 0 8 in", "row",
                                              "begin allgather sweep 2", "allgather case 0 8 in", "row"}));
}

}  // namespace
}  // namespace parbench

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/collective_sweep.hpp"

namespace parbench {
namespace {

// The rows of nccl-tests' table: each collective, each size, out of place before in place; a
// row ends after both its halves.
TEST(CollectiveSweep, PointsInTableOrder) {
    const Collective* const collectives[] = {find_collective("allreduce"), find_collective("allgather")};
    std::vector<std::string> seen;
    SweepSteps steps;
    steps.begin_collective = [&](const Collective& c) { seen.push_back("begin " + std::string(c.name())); };
    steps.measure = [&](const SweepPoint& p) {
        seen.push_back(std::string(p.collective->name()) + ' ' + std::to_string(p.requested_bytes) +
                       (p.inplace ? " in" : " out"));
    };
    steps.end_row = [&](const Collective&, std::uint64_t bytes) { seen.push_back("row " + std::to_string(bytes)); };
    run_sweep(collectives, {8, 16}, {true, true}, steps);
    const std::vector<std::string> expected = {
        "begin allreduce", "allreduce 8 out",  "allreduce 8 in",  "row 8",  "allreduce 16 out", "allreduce 16 in",
        "row 16",          "begin allgather",  "allgather 8 out", "allgather 8 in", "row 8", "allgather 16 out",
        "allgather 16 in", "row 16"};
    EXPECT_EQ(seen, expected);
    EXPECT_EQ(sweep_point_count(2, 2, {true, true}), 8u);
    seen.clear();
    run_sweep(std::span(collectives, 1), {8}, {false, true}, steps);
    EXPECT_EQ(seen, (std::vector<std::string>{"begin allreduce", "allreduce 8 in", "row 8"}));
    EXPECT_EQ(sweep_point_count(1, 1, {false, true}), 1u);
}

}  // namespace
}  // namespace parbench

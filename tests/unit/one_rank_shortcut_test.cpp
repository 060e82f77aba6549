// Which points are labelled as NCCL's one-rank copy rather than a collective.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "collectives/collective.hpp"
#include "collectives/one_rank_shortcut.hpp"

namespace parbench {
namespace {

TEST(OneRankShortcut, NamesTheFiveCollectivesNcclCopiesAtOneRank) {
    const std::set<std::string> copied{"allreduce", "allgather", "reducescatter", "broadcast", "reduce"};
    for (const Collective* collective : all_collectives()) {
        const auto label = one_rank_shortcut(*collective, "nccl", 1, CollectiveParams{});
        const std::string name(collective->name());
        EXPECT_EQ(label.has_value(), copied.count(name) == 1) << name;
        if (label) {
            EXPECT_NE(label->find("no collective runs"), std::string::npos) << *label;
        }
    }
}

TEST(OneRankShortcut, NothingAtTwoRanksOrOnMpi) {
    for (const Collective* collective : all_collectives()) {
        EXPECT_FALSE(one_rank_shortcut(*collective, "nccl", 2, CollectiveParams{})) << collective->name();
        EXPECT_FALSE(one_rank_shortcut(*collective, "mpi", 1, CollectiveParams{})) << collective->name();
    }
}

// avg on a floating type is a PreMulSum, which NCCL scales in a kernel even at one rank;
// on integers it is a sum divided afterwards, a copy at one rank.
TEST(OneRankShortcut, FloatingAverageRunsAKernel) {
    const Collective& allreduce = *find_collective("allreduce");
    EXPECT_FALSE(one_rank_shortcut(allreduce, "nccl", 1, CollectiveParams{DType::float32, ReduceOp::avg}));
    EXPECT_TRUE(one_rank_shortcut(allreduce, "nccl", 1, CollectiveParams{DType::int32, ReduceOp::avg}));
    EXPECT_TRUE(one_rank_shortcut(*find_collective("allgather"), "nccl", 1,
                                  CollectiveParams{DType::float32, ReduceOp::avg}));
}

// At one rank allreduce's, allgather's and reducescatter's factors are 0 already; broadcast's and
// reduce's are 1, which would print a device copy's speed as busbw.
TEST(OneRankShortcut, ACopysBusbwIsZero) {
    for (const char* name : {"broadcast", "reduce", "allreduce"}) {
        const Collective& collective = *find_collective(name);
        EXPECT_EQ(point_bus_factor(collective, 1, true), 0.0) << name;
        EXPECT_EQ(point_bus_factor(collective, 1, false), collective.bus_factor(1)) << name;
        EXPECT_EQ(point_bus_factor(collective, 4, false), collective.bus_factor(4)) << name;
    }
    EXPECT_EQ(find_collective("broadcast")->bus_factor(1), 1.0);
}

}  // namespace
}  // namespace parbench

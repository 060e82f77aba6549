// Which steps pair under --moe-a2a-overlap-1f1b (theory/pipeline/paired_passes.hpp), the rule the
// executor runs and plan prices: in 1F1B's steady state every forward of a rank but the last is
// paired with the backward after it; the warm-up forwards and the cool-down backwards are not.
#include <gtest/gtest.h>

#include "theory/pipeline/paired_passes.hpp"
#include "theory/pipeline/schedule.hpp"

namespace parbench {
namespace {

TEST(PairedPasses, OneFOneBPairsTheSteadyStateOfEveryRankButTheLast) {
    for (const P2pMode mode : {P2pMode::nonblocking, P2pMode::blocking})
        for (int p : {2, 3, 4})
            for (int m : {1, 2, 4, 5, 8}) {
                const Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, ScheduleShape{p, m, 1});
                const std::vector<int> groups = paired_groups_per_rank(schedule, mode);
                ASSERT_EQ(groups.size(), static_cast<std::size_t>(p));
                for (int r = 0; r < p; ++r) {
                    // Rank r runs p - r - 1 warm-up forwards (at most m), then alternates: each
                    // forward after the warm-up's last pairs with the backward after it. With
                    // m <= p - r - 1 the last forward is followed by the first backward: one
                    // pair, of another micro-batch when m >= 2.
                    const int warmup_unpaired = std::min(p - r - 1, m - 1);
                    const int expected = r == p - 1 || m < 2 ? 0 : m - warmup_unpaired;
                    EXPECT_EQ(groups[static_cast<std::size_t>(r)], expected)
                        << p2p_mode_name(mode) << " p=" << p << " m=" << m << " rank " << r;
                }
            }
}

TEST(PairedPasses, GpipeMeetsABackwardOnlyAfterItsLastForward) {
    // All forwards, then all backwards: only F(m-1), B(0) would pair on a rank but the last, which
    // is why the flag takes 1F1B only (theory/moe_a2a_overlap_1f1b.hpp).
    const Schedule schedule = make_schedule(ScheduleKind::gpipe, ScheduleShape{4, 8, 1});
    EXPECT_EQ(paired_groups_per_rank(schedule, P2pMode::nonblocking), (std::vector<int>{1, 1, 1, 0}));
}

TEST(PairedPasses, AGroupIsAForwardAndTheNextBackwardOfAnotherMicrobatch) {
    const Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, ScheduleShape{2, 4, 1});
    const std::vector<Step> steps = rank_steps(schedule.ranks[0], P2pMode::nonblocking);
    const std::vector<int> ends = paired_group_ends(steps, 0, 2);
    ASSERT_EQ(ends.size(), steps.size());
    int groups = 0;
    for (std::size_t i = 0; i < steps.size(); ++i) {
        if (ends[i] < 0) continue;
        ++groups;
        const Action& forward = *steps[i].compute;
        const Action& backward = *steps[static_cast<std::size_t>(ends[i])].compute;
        EXPECT_EQ(forward.kind, ActionKind::forward);
        EXPECT_EQ(backward.kind, ActionKind::backward);
        EXPECT_NE(forward.microbatch, backward.microbatch);
    }
    EXPECT_EQ(groups, 3);
    // The last rank's F(i) feeds its own B(i): nothing pairs.
    for (const int end : paired_group_ends(rank_steps(schedule.ranks[1], P2pMode::nonblocking), 1, 2))
        EXPECT_EQ(end, -1);
}

}  // namespace
}  // namespace parbench

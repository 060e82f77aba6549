// Schedules without MPI: every micro-batch passes F and B (and W) exactly once per chunk,
// in dependency order; the ranks' lists run against each other to completion in both p2p
// modes; with balanced pass costs each schedule's simulated bubble equals its formula.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <tuple>

#include "core/error.hpp"
#include "tests/support/usage_error_text.hpp"
#include "theory/pipeline/schedule.hpp"
#include "theory/pipeline/schedule_simulation.hpp"

namespace parbench {
namespace {

struct Case {
    ScheduleKind kind;
    int p, m, v;
};

std::vector<Case> cases() {
    std::vector<Case> all;
    for (int p : {1, 2, 3, 4, 5})
        for (int m : {1, 2, 3, 4, 5, 8, 12}) {
            all.push_back({ScheduleKind::gpipe, p, m, 1});
            all.push_back({ScheduleKind::one_f_one_b, p, m, 1});
            all.push_back({ScheduleKind::zero_bubble_h1, p, m, 1});
            if (p >= 2 && m % p == 0)
                for (int v : {2, 3}) all.push_back({ScheduleKind::interleaved, p, m, v});
        }
    return all;
}

std::string name(const Case& c) {
    return schedule_kind_name(c.kind) + " p=" + std::to_string(c.p) + " m=" + std::to_string(c.m) +
           " v=" + std::to_string(c.v);
}

TEST(Schedule, EveryPassOncePerMicrobatchAndChunkInDependencyOrder) {
    for (const Case& c : cases()) {
        SCOPED_TRACE(name(c));
        const Schedule s = make_schedule(c.kind, ScheduleShape{c.p, c.m, c.v});
        ASSERT_EQ(s.ranks.size(), static_cast<std::size_t>(c.p));
        for (const auto& actions : s.ranks) {
            // position of each pass per (micro-batch, chunk)
            std::map<std::tuple<int, int, ActionKind>, int> seen;
            for (std::size_t i = 0; i < actions.size(); ++i) {
                if (!actions[i].is_compute()) continue;
                const auto key = std::make_tuple(actions[i].microbatch, actions[i].chunk, actions[i].kind);
                EXPECT_EQ(seen.count(key), 0u) << action_label(actions[i], c.v) << " twice";
                seen[key] = static_cast<int>(i);
            }
            const std::size_t passes = s.split_backward ? 3 : 2;
            EXPECT_EQ(seen.size(), passes * static_cast<std::size_t>(c.m * c.v));
            for (int k = 0; k < c.m; ++k)
                for (int chunk = 0; chunk < c.v; ++chunk) {
                    const int f = seen.at({k, chunk, ActionKind::forward});
                    const int b = seen.at({k, chunk, ActionKind::backward});
                    EXPECT_LT(f, b);
                    if (s.split_backward) {
                        EXPECT_LT(b, seen.at({k, chunk, ActionKind::weight}));
                    }
                }
        }
    }
}

// F/B/W per rank, counted by hand: every micro-batch and chunk once forward and once backward;
// the weight gradient fused into B, or deferred to a W of its own under zb-h1.
TEST(Schedule, PassCountsPerRank) {
    for (const PassCounts& c : pass_counts(make_schedule(ScheduleKind::one_f_one_b, {2, 4, 1})))
        EXPECT_EQ(c, (PassCounts{4, 4, 4, 0}));
    for (const PassCounts& c : pass_counts(make_schedule(ScheduleKind::gpipe, {3, 2, 1})))
        EXPECT_EQ(c, (PassCounts{2, 2, 2, 0}));
    for (const PassCounts& c : pass_counts(make_schedule(ScheduleKind::interleaved, {2, 4, 2})))
        EXPECT_EQ(c, (PassCounts{8, 8, 8, 0}));
    const std::vector<PassCounts> zero_bubble = pass_counts(make_schedule(ScheduleKind::zero_bubble_h1, {2, 4, 1}));
    ASSERT_EQ(zero_bubble.size(), 2u);
    for (const PassCounts& c : zero_bubble) EXPECT_EQ(c, (PassCounts{4, 4, 4, 4}));
    EXPECT_EQ(unpipelined_pass_counts(3), (PassCounts{3, 3, 3, 0}));
}

TEST(Schedule, RanksRunAgainstEachOtherWithoutDeadlockInBothModes) {
    for (const Case& c : cases()) {
        SCOPED_TRACE(name(c));
        const Schedule s = make_schedule(c.kind, ScheduleShape{c.p, c.m, c.v});
        for (P2pMode mode : {P2pMode::nonblocking, P2pMode::blocking}) {
            if (c.kind == ScheduleKind::interleaved && mode == P2pMode::blocking) {
                EXPECT_THROW(validate_p2p_mode(c.kind, mode), UsageError);
                // ...because it deadlocks once the steady state has a cool-down to drain.
                if (c.m > c.p) EXPECT_FALSE(simulate_schedule(s, mode, balanced_costs(s)).completed);
                continue;
            }
            const SimulationResult result = simulate_schedule(s, mode, balanced_costs(s));
            EXPECT_TRUE(result.completed) << p2p_mode_name(mode) << ": " << result.problem;
        }
    }
}

TEST(Schedule, SimulatedBubbleMatchesTheFormulaOnBalancedStages) {
    for (const Case& c : cases()) {
        if (c.m < c.p) continue;  // the formulas assume the pipeline fills
        SCOPED_TRACE(name(c));
        const Schedule s = make_schedule(c.kind, ScheduleShape{c.p, c.m, c.v});
        const SimulationResult result = simulate_schedule(s, P2pMode::nonblocking, balanced_costs(s));
        ASSERT_TRUE(result.completed) << result.problem;
        EXPECT_NEAR(result.bubble(), theoretical_bubble(c.kind, s.shape), 1e-12);
    }
}

TEST(Schedule, PeakActivationsInFlight) {
    const ScheduleShape shape{4, 8, 1};
    EXPECT_EQ(peak_in_flight(make_schedule(ScheduleKind::gpipe, shape)),
              (std::vector<std::vector<int>>{{8}, {8}, {8}, {8}}));
    EXPECT_EQ(peak_in_flight(make_schedule(ScheduleKind::one_f_one_b, shape)),
              (std::vector<std::vector<int>>{{4}, {3}, {2}, {1}}));
    // ZB-H1 keeps p in flight on every rank: 1F1B's peak, held until W.
    EXPECT_EQ(peak_in_flight(make_schedule(ScheduleKind::zero_bubble_h1, shape)),
              (std::vector<std::vector<int>>{{4}, {4}, {4}, {4}}));
}

TEST(Schedule, MismatchedOrdersAreCaught) {
    Schedule s = make_schedule(ScheduleKind::one_f_one_b, ScheduleShape{2, 2, 1});
    // Swap rank 1's two forward groups (recv-act, F, ...) so it expects micro-batch 1 first.
    auto& rank1 = s.ranks[1];
    for (Action& action : rank1)
        if (action.kind == ActionKind::recv_activation) action.microbatch = 1 - action.microbatch;
    EXPECT_FALSE(simulate_schedule(s, P2pMode::nonblocking, balanced_costs(s)).completed);
    // A receive with no send: deadlock.
    Schedule lonely = make_schedule(ScheduleKind::gpipe, ScheduleShape{2, 1, 1});
    lonely.ranks[0].insert(lonely.ranks[0].begin(), Action{ActionKind::recv_gradient, 0, 0, 1});
    const SimulationResult result = simulate_schedule(lonely, P2pMode::nonblocking, balanced_costs(lonely));
    EXPECT_FALSE(result.completed);
    EXPECT_NE(result.problem.find("deadlock"), std::string::npos);
}

TEST(Schedule, PrintsOneLinePerRank) {
    std::ostringstream out;
    print_schedule(out, make_schedule(ScheduleKind::one_f_one_b, ScheduleShape{2, 3, 1}));
    const std::string text = out.str();
    EXPECT_NE(text.find("rank 0: F0 F1 B0 F2 B1 B2\n"), std::string::npos) << text;
    EXPECT_NE(text.find("rank 1: F0 B0 F1 B1 F2 B2\n"), std::string::npos) << text;
    EXPECT_NE(text.find("(p-1)/(m+p-1)"), std::string::npos);
}

TEST(Schedule, BadShapesNameTheFlag) {
    auto message = [](ScheduleKind kind, ScheduleShape shape) {
        return testing::usage_error_text([&] { validate_schedule_shape(kind, shape); });
    };
    EXPECT_NE(message(ScheduleKind::interleaved, {4, 2, 2}).find("use at least 4"), std::string::npos);
    EXPECT_NE(message(ScheduleKind::interleaved, {4, 6, 2}).find("multiple of 4"), std::string::npos);
    EXPECT_NE(message(ScheduleKind::one_f_one_b, {4, 8, 2}).find("--virtual-stages"), std::string::npos);
    EXPECT_NE(message(ScheduleKind::interleaved, {2, 4, 1}).find("--virtual-stages"), std::string::npos);
    EXPECT_THROW(parse_schedule_kind("zb-v"), UsageError);
    EXPECT_THROW(parse_p2p_mode("async"), UsageError);
}

}  // namespace
}  // namespace parbench

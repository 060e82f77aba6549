// Schedules without MPI: every micro-batch passes F and B (and W) exactly once per chunk,
// in dependency order; the ranks' lists run against each other to completion in both p2p
// modes; with balanced pass costs each schedule's simulated bubble equals its formula.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/error.hpp"
#include "tests/support/usage_error_text.hpp"
#include "theory/pipeline/partition.hpp"
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
                if (c.m > c.p) {
                    EXPECT_FALSE(simulate_schedule(s, mode, balanced_costs(s)).completed);
                }
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

// One pool per rank, sized by the peak held at once over its chunks: under the interleaved
// schedule exactly Megatron-LM's count, min((p-r-1)*2 + (v-1)*p, m*v) + 1 (micro-batch, chunk)
// pairs on rank r (arXiv 2104.04473 sec. 2.2), p*v + p - 1 on rank 0: L(1 + (p-1)/(p*v)) layers
// (arXiv 2205.05198 sec. 4.2.3); fewer than the sum of the chunks' own peaks. With one chunk
// (GPipe, 1F1B, ZB-H1) the pool is that chunk's peak.
// chunk_occupancy keeps each count once: the counts after every take, walked here over the order
// the executor issues the actions in, are the same set, so every peak over them is too; and in
// nonblocking mode that order is the schedule's own.
TEST(Schedule, ChunkOccupancyIsEveryDistinctCountAfterATake) {
    bool repeats_dropped = false;
    for (const Case& c : cases()) {
        SCOPED_TRACE(name(c));
        const Schedule s = make_schedule(c.kind, ScheduleShape{c.p, c.m, c.v});
        for (P2pMode mode : {P2pMode::nonblocking, P2pMode::blocking}) {
            if (c.kind == ScheduleKind::interleaved && mode == P2pMode::blocking) continue;
            const std::vector<std::vector<Action>> order = issue_order(s, mode);
            if (mode == P2pMode::nonblocking) {
                EXPECT_EQ(order, s.ranks);
            }
            const std::vector<ChunkOccupancy> occupancy = chunk_occupancy(s, mode);
            ASSERT_EQ(occupancy.size(), static_cast<std::size_t>(c.p));
            for (int r = 0; r < c.p; ++r) {
                std::vector<int> held(static_cast<std::size_t>(c.v), 0);
                std::set<std::vector<int>> taken;
                int takes = 0;
                for (const Action& a : order[static_cast<std::size_t>(r)]) {
                    const bool first_stage = a.chunk * c.p + r == 0;
                    if (a.kind == ActionKind::recv_activation || (a.kind == ActionKind::forward && first_stage)) {
                        ++held[static_cast<std::size_t>(a.chunk)];
                        taken.insert(held);
                        ++takes;
                    } else if (a.kind == (s.split_backward ? ActionKind::weight : ActionKind::backward)) {
                        --held[static_cast<std::size_t>(a.chunk)];
                    }
                }
                const ChunkOccupancy& kept = occupancy[static_cast<std::size_t>(r)];
                EXPECT_EQ(std::set<std::vector<int>>(kept.begin(), kept.end()), taken) << "rank " << r;
                EXPECT_EQ(kept.size(), taken.size()) << "rank " << r << ": a count kept twice";
                repeats_dropped = repeats_dropped || static_cast<int>(kept.size()) < takes;
            }
        }
    }
    EXPECT_TRUE(repeats_dropped);  // 1F1B's steady state repeats its counts
}

TEST(Schedule, ActivationPoolIsTheRanksPeakHeldAtOnce) {
    for (int p : {2, 3, 4, 8})
        for (int v : {2, 3, 4})
            for (int m : {p, 2 * p, 4 * p}) {
                const int layers = 2 * p * v;  // chunks of 2 layers
                const Schedule s = make_schedule(ScheduleKind::interleaved, ScheduleShape{p, m, v});
                const std::vector<LayerRange> ranges = virtual_stage_layers(layers, p, v, {});
                bool below_per_chunk_pools = false;
                for (int r = 0; r < p; ++r) {
                    SCOPED_TRACE("p=" + std::to_string(p) + " v=" + std::to_string(v) + " m=" + std::to_string(m) +
                                 " rank " + std::to_string(r));
                    const PipelinePart part = pipeline_part(s, r, ranges);
                    const ActivationPool pool = activation_pool(part, std::vector<int>(static_cast<std::size_t>(layers), 0));
                    const int megatron = std::min(std::min((p - r - 1) * 2 + (v - 1) * p, m * v) + 1, m * v);
                    EXPECT_EQ(pool.slots, megatron);
                    EXPECT_EQ(pool.layer_stores, std::vector<int>{2 * megatron});
                    if (r == 0 && m * v >= p * v + p - 1) {  // enough micro-batches to fill the warm-up
                        EXPECT_EQ(pool.layer_stores[0] * p * v, layers * (p * v + p - 1))
                            << "rank 0: L(1 + (p-1)/(p v)) layers";
                    }
                    int per_chunk_pools = 0;
                    for (int held : part.slots) per_chunk_pools += held;
                    EXPECT_LE(pool.slots, per_chunk_pools);
                    below_per_chunk_pools = below_per_chunk_pools || pool.slots < per_chunk_pools;
                    EXPECT_EQ(pool.heads, r == p - 1 ? 1 : 0);  // the last stage runs each micro-batch's F then B
                }
                // With m = p the chunks' peaks coincide (every chunk's micro-batches are all in
                // flight at the end of the warm-up) and the pool saves nothing; with more it does.
                if (m > p) {
                    EXPECT_TRUE(below_per_chunk_pools) << "p=" << p << " v=" << v << " m=" << m;
                }
            }
    for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zero_bubble_h1}) {
        const Schedule s = make_schedule(kind, ScheduleShape{4, 8, 1});
        for (int r = 0; r < 4; ++r) {
            const PipelinePart part = pipeline_part(s, r, virtual_stage_layers(8, 4, 1, {}));
            const ActivationPool pool = activation_pool(part, std::vector<int>(8, 0));
            EXPECT_EQ(pool.slots, part.slots.at(0));
            EXPECT_EQ(pool.layer_stores, std::vector<int>{2 * part.slots.at(0)});
        }
    }
}

// Layer stores of different kinds (dense, MoE) are pooled apart: each kind's peak.
TEST(Schedule, ActivationPoolCountsEachKindOfLayerStore) {
    const Schedule s = make_schedule(ScheduleKind::interleaved, ScheduleShape{2, 4, 2});
    // 8 layers in 4 chunks of 2; odd layers MoE: every chunk one of each.
    const std::vector<int> kinds{0, 1, 0, 1, 0, 1, 0, 1};
    const PipelinePart part = pipeline_part(s, 0, virtual_stage_layers(8, 2, 2, {}));
    const ActivationPool pool = activation_pool(part, kinds);
    EXPECT_EQ(pool.layer_stores, (std::vector<int>{pool.slots, pool.slots}));
    // Rank 0's chunks hold layers 0-1 (dense) and 4-5 (MoE): each kind peaks with its chunk's own peak.
    const ActivationPool split = activation_pool(part, {0, 0, 0, 0, 1, 1, 1, 1});
    EXPECT_EQ(split.layer_stores, (std::vector<int>{2 * part.slots.at(0), 2 * part.slots.at(1)}));
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

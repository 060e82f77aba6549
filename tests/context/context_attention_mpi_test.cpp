// ContextAttention on real MPI, both styles and both balances, multi-head and grouped-query
// shapes: every rank builds the whole sequence's q, k, v and dout from one seed, runs its
// context_positions() slice through ContextAttention, and its output and dq, dk, dv must equal
// the single-process gqa_attention on the whole sequence, sliced the same way. The cp group's
// counted traffic must equal theory/context_traffic.hpp's formula exactly, and the work per rank
// (scores computed) must be equal under zigzag and unequal under balance none. Launched by
// CTest with 2, 3 and 4 ranks; the 4-rank run also tests groups of 2 and of 1 split from it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "device/cpu_device.hpp"
#include "tests/support/mpi_gtest_main.hpp"
#include "tests/support/usage_error_text.hpp"
#include "theory/context_traffic.hpp"
#include "train/context/context_attention.hpp"
#include "train/memory_ledger.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

struct World {
    std::unique_ptr<MpiCommunicator> comm = MpiCommunicator::world();
    CpuDevice device;
};

World* world = nullptr;

std::vector<float> random_vector(std::size_t n, std::uint32_t seed) {
    std::mt19937 engine(seed);
    std::uniform_real_distribution<float> distribution(-1.0f, 1.0f);
    std::vector<float> values(n);
    for (float& value : values) value = distribution(engine);
    return values;
}

// The ring merges per-block partial sums and the all-to-all runs the same loops on fewer heads,
// so results agree with the whole-sequence attention to float rounding of sums of at most T
// terms of magnitude ~1 (T <= 24 here): 1e-5 absolute plus 1e-4 relative.
::testing::AssertionResult all_close(const std::vector<float>& actual, const std::vector<float>& expected) {
    std::size_t wrong = 0;
    std::ostringstream first;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
        if (!(error <= 1e-5 + 1e-4 * std::abs(expected[i])) && ++wrong <= 5)
            first << "\n  [" << i << "] " << actual[i] << ", expected " << expected[i];
    }
    if (wrong == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << wrong << " of " << expected.size() << " elements differ:" << first.str();
}

// The rows of `whole` (B, T, width) at `positions`, in that order: (B, positions.size(), width).
std::vector<float> slice(const std::vector<float>& whole, int B, int T, std::size_t width,
                         const std::vector<int>& positions) {
    std::vector<float> part;
    for (int b = 0; b < B; ++b)
        for (int position : positions) {
            const auto row = whole.begin() + static_cast<std::ptrdiff_t>((static_cast<std::size_t>(b) * T + position) * width);
            part.insert(part.end(), row, row + static_cast<std::ptrdiff_t>(width));
        }
    return part;
}

TrafficByOp measured(const CommStats& stats) {
    TrafficByOp traffic;
    for (const auto& [op, counter] : stats.by_op)
        traffic[op] = CollectiveVolume{static_cast<double>(counter.calls), static_cast<double>(counter.bytes)};
    return traffic;
}

TrafficByOp plus(TrafficByOp a, const TrafficByOp& b) {
    for (const auto& [op, volume] : b) {
        a[op].calls += volume.calls;
        a[op].bytes += volume.bytes;
    }
    return a;
}

std::string describe(const TrafficByOp& traffic) {
    std::ostringstream text;
    for (const auto& [op, volume] : traffic) text << ' ' << op << ": " << volume.calls << " calls, " << volume.bytes << " B;";
    return text.str();
}

struct Case {
    std::string name;
    GqaShape whole;  // the whole sequence, as a rank without cp would hold it
};

// Multi-head (NH = NKV), grouped (2c query heads over 2 key/value heads: c divides NKV only
// for c = 2), and a tensor-parallel rank whose key/value heads are replicated (its c query
// heads are global heads c..2c-1, all reading key/value head 1 of 2).
std::vector<Case> cases_for(int c) {
    const int T = 6 * c;  // divisible by 2c: both balances
    return {{"multi-head", GqaShape{2, T, 2 * c, 2 * c, 4, 0, 1}},
            {"grouped", GqaShape{2, T, 2 * c, 2, 4, 0, c}},
            {"replicated kv", GqaShape{1, T, c, 2, 4, c, c}}};
}

// Every rank's score count, gathered over the group.
std::vector<std::uint64_t> gather_work(Communicator& cp, std::uint64_t mine) {
    std::vector<std::uint64_t> all(cp.size());
    cp.allgather(&mine, all.data(), 1, DType::uint64);
    return all;
}

void check_case(Communicator& cp, ContextStyle style, ContextBalance balance, const Case& test_case) {
    SCOPED_TRACE(::testing::Message() << context_style_name(style) << ", balance " << context_balance_name(balance)
                                      << ", " << test_case.name << ", cp " << cp.size() << ", rank " << cp.rank());
    const int c = cp.size();
    const GqaShape& s = test_case.whole;
    CpuOps ops;
    MemoryLedger ledger(world->device);

    const auto q = random_vector(s.q_elements(), 100), k = random_vector(s.kv_elements(), 101),
               v = random_vector(s.kv_elements(), 102), dout = random_vector(s.q_elements(), 103);
    std::vector<float> out(s.q_elements()), preatt(s.score_elements()), att(s.score_elements()),
        datt(s.score_elements());
    ops.gqa_attention_forward(out.data(), preatt.data(), att.data(), q.data(), k.data(), v.data(), s);
    // Gradients start from a non-zero value on both sides: backward must add, not overwrite.
    std::vector<float> dq(s.q_elements(), 0.25f), dk(s.kv_elements(), 0.25f), dv(s.kv_elements(), 0.25f);
    ops.gqa_attention_backward(dq.data(), dk.data(), dv.data(), preatt.data(), datt.data(), dout.data(), q.data(),
                               k.data(), v.data(), att.data(), s);

    const ContextSplit split{cp.rank(), c, style, balance};
    const std::vector<int> positions = context_positions(s.T, split);
    GqaShape local = s;
    local.T = s.T / c;
    const auto part = [&](const std::vector<float>& whole, std::size_t width) {
        return slice(whole, s.B, s.T, width, positions);
    };
    const auto local_q = part(q, s.q_width()), local_k = part(k, s.kv_width()), local_v = part(v, s.kv_width()),
               local_dout = part(dout, s.q_width());

    ContextAttention attention(cp, ops, ledger, split, local, s.T);
    std::vector<float> local_out(local.q_elements()), saved(attention.saved_floats());
    std::vector<float> local_dq(local.q_elements(), 0.25f), local_dk(local.kv_elements(), 0.25f),
        local_dv(local.kv_elements(), 0.25f);
    cp.stats().reset();
    attention.reset_counters();

    const ContextLayerTraffic expected = context_attention_traffic(context_attention_shape(local, c, style));
    attention.forward(local_out.data(), saved.data(), local_q.data(), local_k.data(), local_v.data());
    EXPECT_TRUE(all_close(local_out, part(out, s.q_width())));
    EXPECT_TRUE(traffic_matches(expected.forward.by_op, measured(cp.stats())))
        << "expected" << describe(expected.forward.by_op) << " measured" << describe(measured(cp.stats()));
    EXPECT_EQ(static_cast<double>(attention.counters().bytes_sent), expected.forward.bytes_sent);
    EXPECT_EQ(static_cast<double>(attention.counters().messages), expected.forward.messages);
    const std::uint64_t forward_work = attention.counters().score_elements;

    attention.backward(local_dq.data(), local_dk.data(), local_dv.data(), local_dout.data(), local_out.data(),
                       saved.data(), local_q.data(), local_k.data(), local_v.data());
    EXPECT_TRUE(all_close(local_dq, part(dq, s.q_width())));
    EXPECT_TRUE(all_close(local_dk, part(dk, s.kv_width())));
    EXPECT_TRUE(all_close(local_dv, part(dv, s.kv_width())));
    const TrafficByOp both = plus(expected.forward.by_op, expected.backward.by_op);
    EXPECT_TRUE(traffic_matches(both, measured(cp.stats())))
        << "expected" << describe(both) << " measured" << describe(measured(cp.stats()));
    EXPECT_EQ(static_cast<double>(attention.counters().bytes_sent),
              expected.forward.bytes_sent + expected.backward.bytes_sent);
    EXPECT_EQ(static_cast<double>(attention.counters().messages),
              expected.forward.messages + expected.backward.messages);
    EXPECT_GE(attention.counters().compute_ms, 0.0);
    EXPECT_GE(attention.counters().wait_ms, 0.0);

    // Work: one pass over the whole causal attention evaluates B NH T(T+1)/2 scores.
    const std::uint64_t pass = static_cast<std::uint64_t>(s.B) * s.NH * s.T * (s.T + 1) / 2;
    const std::vector<std::uint64_t> forward_by_rank = gather_work(cp, forward_work);
    const std::vector<std::uint64_t> work = gather_work(cp, attention.counters().score_elements);
    std::uint64_t forward_total = 0;
    for (std::uint64_t w : forward_by_rank) forward_total += w;
    if (style == ContextStyle::ring) {
        EXPECT_EQ(forward_total, pass);  // every visible pair once, none twice
        for (int r = 1; r < c; ++r) {
            if (balance == ContextBalance::zigzag)
                EXPECT_EQ(work[r], work[0]) << "rank " << r;
            else
                EXPECT_GT(work[r], work[r - 1]) << "rank " << r << ": later chunks see more keys";
        }
    } else {
        // forward, and backward's recomputed forward and backward, on NH / c heads each
        for (int r = 0; r < c; ++r) EXPECT_EQ(work[r], 3 * pass / c) << "rank " << r;
    }
    EXPECT_EQ(forward_by_rank[cp.rank()], forward_work);
}

void check_every_case(Communicator& cp, ContextStyle style) {
    for (ContextBalance balance : {ContextBalance::zigzag, ContextBalance::none})
        for (const Case& test_case : cases_for(cp.size())) check_case(cp, style, balance, test_case);
}

// The world, and on 4 ranks its halves (cp 2 on ranks that are not the world's 0 and 1) and
// single ranks (cp 1: no communication).
std::vector<std::unique_ptr<Communicator>> smaller_groups() {
    std::vector<std::unique_ptr<Communicator>> groups;
    Communicator& comm = *world->comm;
    if (comm.size() == 4) groups.push_back(comm.split(comm.rank() / 2, comm.rank()));
    groups.push_back(comm.split(comm.rank(), 0));
    return groups;
}

TEST(ContextAttentionOverMpi, RingEqualsWholeSequenceAttention) {
    check_every_case(*world->comm, ContextStyle::ring);
    for (auto& group : smaller_groups()) check_every_case(*group, ContextStyle::ring);
}

TEST(ContextAttentionOverMpi, AlltoallEqualsWholeSequenceAttention) {
    check_every_case(*world->comm, ContextStyle::alltoall);
    for (auto& group : smaller_groups()) check_every_case(*group, ContextStyle::alltoall);
}

TEST(ContextAttentionOverMpi, RefusesWhatCannotBeSplit) {
    Communicator& cp = *world->comm;
    const int c = cp.size();
    CpuOps ops;
    MemoryLedger ledger(world->device);
    // c + 1 heads never divide by c >= 2
    const GqaShape odd_heads{1, 2, c + 1, c + 1, 4, 0, 1};
    const std::string heads = testing::usage_error_text([&] {
        ContextAttention attempt(cp, ops, ledger,
                                 ContextSplit{cp.rank(), c, ContextStyle::alltoall, ContextBalance::zigzag}, odd_heads,
                                 2 * c);
    });
    EXPECT_NE(heads.find("--cp-style alltoall"), std::string::npos) << heads;
    EXPECT_NE(heads.find("--cp " + std::to_string(c)), std::string::npos) << heads;
    EXPECT_NE(heads.find("--cp-style ring"), std::string::npos) << heads;
    // ring takes the same heads
    EXPECT_EQ(testing::usage_error_text([&] {
                  ContextAttention attempt(cp, ops, ledger,
                                           ContextSplit{cp.rank(), c, ContextStyle::ring, ContextBalance::zigzag},
                                           odd_heads, 2 * c);
              }),
              "");
    // 3c tokens: c divides them, 2c does not
    const GqaShape three_each{1, 3, 2, 2, 4, 0, 1};
    const std::string zigzag = testing::usage_error_text([&] {
        ContextAttention attempt(cp, ops, ledger,
                                 ContextSplit{cp.rank(), c, ContextStyle::ring, ContextBalance::zigzag}, three_each,
                                 3 * c);
    });
    EXPECT_NE(zigzag.find("--cp-balance zigzag"), std::string::npos) << zigzag;
}

}  // namespace
}  // namespace parbench

int main(int argc, char** argv) { return parbench::run_all_tests_on_every_rank(argc, argv, parbench::world); }

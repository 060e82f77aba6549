// The mixture-of-experts ops (ops.hpp's "mixture of experts" block) on the CPU: the shared
// per-element functions of kernels/moe_dispatch_math.hpp and moe_router_math.hpp on cases
// worked by hand, and CpuOps's MoE ops against the router's host code (train/moe/router.hpp),
// bit for bit, which is what keeps the MoE layer's CPU results unchanged now that it calls them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gradient_check.hpp"
#include "kernels/moe_dispatch_math.hpp"
#include "kernels/moe_router_math.hpp"
#include "train/moe/router.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

// Two tokens, k = 2, C = 2; expert-major rows: token 0's choices in rows 1 and 0, token 1's
// second choice dropped.
const std::vector<int> example_slot{1, 0, 2, -1};
const std::vector<float> example_weights{0.75f, 0.25f, 0.5f, 0.5f};
const std::vector<float> example_expert_out{1.0f, 2.0f, 10.0f, 20.0f, -4.0f, 8.0f};  // 3 rows of C = 2

TEST(MoeDispatchMath, CombineElementAddsTheKeptChoicesInOrder) {
    // token 0, element 0: 0.5 + 0.75·10 + 0.25·1 = 8.25; element 1: 0.75·20 + 0.25·2 = 15.5
    EXPECT_EQ(moe_combine_element(0.5f, example_expert_out.data(), example_slot.data(), example_weights.data(), 2, 2, 0),
              8.25f);
    EXPECT_EQ(moe_combine_element(0.0f, example_expert_out.data(), example_slot.data(), example_weights.data(), 2, 2, 1),
              15.5f);
    // token 1: the dropped choice adds nothing: 0.5·(-4), 0.5·8
    EXPECT_EQ(moe_combine_element(0.0f, example_expert_out.data(), example_slot.data() + 2, example_weights.data() + 2,
                                  2, 2, 0),
              -2.0f);
    EXPECT_EQ(moe_combine_element(1.0f, example_expert_out.data(), example_slot.data() + 2, example_weights.data() + 2,
                                  2, 2, 1),
              5.0f);
}

TEST(MoeDispatchMath, CombineBackwardGivesTheWeightsAndRowsGradients) {
    const std::vector<float> dy{3.0f, -1.0f}, expert_row{10.0f, 20.0f};
    std::vector<float> dexpert_row{99.0f, 99.0f};  // overwritten
    EXPECT_EQ(moe_combine_backward_assignment(dexpert_row.data(), dy.data(), expert_row.data(), 0.75f, 2), 10.0f);
    EXPECT_EQ(dexpert_row, (std::vector<float>{2.25f, -0.75f}));
}

TEST(MoeDispatchMath, DispatchBackwardSumsTheKeptRows) {
    // token 0: rows 1 and 0; token 1: row 2 only.
    EXPECT_EQ(moe_dispatch_backward_element(1.0f, example_expert_out.data(), example_slot.data(), 2, 2, 1), 23.0f);
    EXPECT_EQ(moe_dispatch_backward_element(0.0f, example_expert_out.data(), example_slot.data() + 2, 2, 2, 0), -4.0f);
}

TEST(MoeRouterMath, RouteTokenIsScoresThenTopKThenWeights) {
    // logits (0, ln 3, ln 2, 0): softmax (1, 3, 2, 1)/7; top-2 = experts 1, 2; weights 3/5, 2/5.
    const float logits[4] = {0.0f, std::log(3.0f), std::log(2.0f), 0.0f};
    float scores[4];
    int chosen[2];
    float weights[2];
    moe_route_token(scores, chosen, weights, logits, nullptr, 4, 2, MoeScore::softmax);
    EXPECT_EQ(chosen[0], 1);
    EXPECT_EQ(chosen[1], 2);
    EXPECT_NEAR(scores[0], 1.0 / 7, 1e-6);
    EXPECT_NEAR(weights[0], 0.6, 1e-6);
    EXPECT_NEAR(weights[1], 0.4, 1e-6);
    // A bias steers the choice only: +1 on expert 3 picks it first, its weight still from s_3.
    const float bias[4] = {0.0f, 0.0f, 0.0f, 1.0f};
    moe_route_token(scores, chosen, weights, logits, bias, 4, 2, MoeScore::softmax);
    EXPECT_EQ(chosen[0], 3);
    EXPECT_EQ(chosen[1], 1);
    EXPECT_NEAR(weights[0], 0.25, 1e-6);
}

TEST(MoeRouterMath, BalanceCoefficientByHand) {
    // 0.5 · E (4) · routed (3) / (N² (16) · k (2)) = 6 / 32
    EXPECT_EQ(moe_balance_coefficient(0.5, 4, 3, 4, 2), 0.1875f);
    EXPECT_EQ(moe_balance_coefficient(0.0, 4, 3, 4, 2), 0.0f);
}

// Host routing buffers for a group of N tokens.
struct Routing {
    Routing(int N, int E, int k)
        : scores(static_cast<std::size_t>(N) * E), weights(static_cast<std::size_t>(N) * k),
          chosen(static_cast<std::size_t>(N) * k), slot(static_cast<std::size_t>(N) * k),
          expert_start(static_cast<std::size_t>(E) + 1), routed(static_cast<std::size_t>(E)) {}
    RoutingBuffers buffers() {
        return RoutingBuffers{scores.data(), chosen.data(), weights.data(), slot.data(), expert_start.data(),
                              routed.data()};
    }
    std::vector<float> scores, weights;
    std::vector<int> chosen, slot, expert_start, routed;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// What the MoE layer runs (CpuOps::moe_route, then assign_expert_rows) against route_tokens,
// for both score functions, with a bias and with the capacity dropping assignments.
TEST(MoeOps, RouteThenAssignRowsIsRouteTokens) {
    const int N = 23, E = 6, k = 2;
    const auto logits = random_vector(static_cast<std::size_t>(N) * E, 80, -2.0f, 2.0f);
    const auto bias = random_vector(E, 81, -0.1f, 0.1f);
    CpuOps ops;
    for (MoeScore score : {MoeScore::softmax, MoeScore::sigmoid}) {
        const RouterShape shape{N, E, k, score, 0.8};
        Routing reference(N, E, k), split(N, E, k);
        const RoutingCounts expected = route_tokens(reference.buffers(), logits.data(), bias.data(), shape);
        ops.moe_route(split.scores.data(), split.chosen.data(), split.weights.data(), logits.data(), bias.data(), N, E,
                      k, score);
        const RoutingCounts counts = assign_expert_rows(split.buffers(), shape);
        EXPECT_GT(expected.dropped, 0);
        EXPECT_EQ(counts.routed, expected.routed);
        EXPECT_EQ(counts.kept, expected.kept);
        EXPECT_EQ(counts.dropped, expected.dropped);
        EXPECT_TRUE(same_bits(split.scores, reference.scores));
        EXPECT_TRUE(same_bits(split.weights, reference.weights));
        EXPECT_EQ(split.chosen, reference.chosen);
        EXPECT_EQ(split.slot, reference.slot);
        EXPECT_EQ(split.expert_start, reference.expert_start);
        EXPECT_EQ(split.routed, reference.routed);
    }
}

// The router's backward op against route_backward, with the balancing term and dropped
// assignments (whose dweights moe_combine_backward zeroes).
TEST(MoeOps, RouteBackwardIsTheRoutersBackward) {
    const int N = 19, E = 5, k = 2, C = 3;
    const auto logits = random_vector(static_cast<std::size_t>(N) * E, 82, -2.0f, 2.0f);
    CpuOps ops;
    for (MoeScore score : {MoeScore::softmax, MoeScore::sigmoid}) {
        const RouterShape shape{N, E, k, score, 0.7};
        Routing routing(N, E, k);
        const RoutingCounts counts = route_tokens(routing.buffers(), logits.data(), nullptr, shape);
        ASSERT_GT(counts.dropped, 0);
        const auto dout = random_vector(static_cast<std::size_t>(N) * C, 83);
        const auto expert_out = random_vector(static_cast<std::size_t>(routing.expert_start[E]) * C, 84);
        std::vector<float> dexpert_out(expert_out.size()), dweights(static_cast<std::size_t>(N) * k, 7.0f);
        ops.moe_combine_backward(dexpert_out.data(), dweights.data(), dout.data(), expert_out.data(),
                                 routing.slot.data(), routing.weights.data(), N, k, C);
        for (std::size_t a = 0; a < dweights.size(); ++a) {
            if (routing.slot[a] < 0) {
                EXPECT_EQ(dweights[a], 0.0f) << "assignment " << a;
            }
        }
        std::vector<float> expected(static_cast<std::size_t>(N) * E), dlogits(expected.size(), 5.0f);
        route_backward(expected.data(), dweights.data(), routing.buffers(), shape, 0.3);
        ops.moe_route_backward(dlogits.data(), dweights.data(), routing.scores.data(), routing.weights.data(),
                               routing.chosen.data(), routing.routed.data(), 0.3, N, E, k, score);
        EXPECT_TRUE(same_bits(dlogits, expected));
    }
}

// Dispatch, an identity "expert", then combine: each token gets back its row times the sum of
// its kept weights; the backward ops give dx = that sum times dy, and the rows' gradients.
TEST(MoeOps, DispatchCombineAndTheirBackwardOnAnIdentityExpert) {
    const int N = 3, k = 2, C = 4;
    const std::vector<int> slot{2, 0, -1, 1, 3, -1};
    const std::vector<float> weights{0.5f, 0.25f, 0.5f, 0.5f, 1.0f, 0.0f};
    const auto x = random_vector(static_cast<std::size_t>(N) * C, 85);
    CpuOps ops;
    std::vector<float> dispatched(4 * C, -1.0f);
    ops.moe_dispatch(dispatched.data(), x.data(), slot.data(), N, k, C);
    for (int c = 0; c < C; ++c) {
        EXPECT_EQ(dispatched[2 * C + c], x[c]);
        EXPECT_EQ(dispatched[0 * C + c], x[c]);
        EXPECT_EQ(dispatched[1 * C + c], x[C + c]);
        EXPECT_EQ(dispatched[3 * C + c], x[2 * C + c]);
    }
    std::vector<float> out(static_cast<std::size_t>(N) * C, 0.0f);
    ops.moe_combine(out.data(), dispatched.data(), slot.data(), weights.data(), N, k, C);
    const float kept_weight[3] = {0.75f, 0.5f, 1.0f};
    for (int t = 0; t < N; ++t)
        for (int c = 0; c < C; ++c) EXPECT_FLOAT_EQ(out[t * C + c], kept_weight[t] * x[t * C + c]);

    const auto dy = random_vector(static_cast<std::size_t>(N) * C, 86);
    std::vector<float> drows(dispatched.size(), 0.0f), dweights(6);
    ops.moe_combine_backward(drows.data(), dweights.data(), dy.data(), dispatched.data(), slot.data(), weights.data(),
                             N, k, C);
    auto dx = random_vector(static_cast<std::size_t>(N) * C, 87);
    const auto dx_before = dx;
    ops.moe_dispatch_backward(dx.data(), drows.data(), slot.data(), N, k, C);
    for (int t = 0; t < N; ++t) {
        double dot = 0.0;
        for (int c = 0; c < C; ++c) {
            EXPECT_FLOAT_EQ(dx[t * C + c], dx_before[t * C + c] + kept_weight[t] * dy[t * C + c]);
            dot += static_cast<double>(dy[t * C + c]) * x[t * C + c];
        }
        for (int i = 0; i < k; ++i) {
            const int a = t * k + i;
            EXPECT_NEAR(dweights[a], slot[a] < 0 ? 0.0 : dot, 1e-6) << "assignment " << a;
        }
    }
}

TEST(MoeOps, CopiesToAndFromTheHost) {
    CpuOps ops;
    const std::vector<int> source{3, -1, 7};
    std::vector<int> device(3), back(3);
    ops.copy_from_host(device.data(), source.data(), 3 * sizeof(int));
    ops.copy_to_host(back.data(), device.data(), 3 * sizeof(int));
    EXPECT_EQ(back, source);
}

}  // namespace
}  // namespace parbench

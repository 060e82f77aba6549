// CpuOps' embedding and cross-entropy, whole and split by vocabulary shard: the shard parts
// combined across "ranks" must reproduce the unsplit op exactly as the engine will combine them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gradient_check.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

TEST(CpuOps, EncoderForwardAddsTokenAndPosition) {
    CpuOps ops;
    const int B = 2, T = 3, C = 4, V = 5, maxT = 6;
    const auto wte = random_vector(V * C, 40), wpe = random_vector(maxT * C, 41);
    const auto tokens = random_tokens(B * T, V, 42);
    std::vector<float> out(B * T * C);
    ops.encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t)
            for (int c = 0; c < C; ++c)
                EXPECT_FLOAT_EQ(out[(b * T + t) * C + c], wte[tokens[b * T + t] * C + c] + wpe[t * C + c]);
}

TEST(CpuOps, EncoderBackwardMatchesFiniteDifferences) {
    CpuOps ops;
    const int B = 2, T = 3, C = 4, V = 4, maxT = 3;
    auto wte = random_vector(V * C, 43), wpe = random_vector(maxT * C, 44);
    const std::vector<int> tokens{1, 1, 3, 0, 1, 2};  // repeats: gradients must add up
    const auto dout = random_vector(B * T * C, 45);
    auto dwte = prefilled(V * C), dwpe = prefilled(maxT * C);
    ops.encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
    std::vector<float> out(B * T * C);
    const auto loss = [&] {
        ops.encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
        return weighted_sum(out, dout);
    };
    EXPECT_TRUE(matches_finite_differences(wte, minus_prefill(dwte), loss));
    EXPECT_TRUE(matches_finite_differences(wpe, minus_prefill(dwpe), loss));
}

TEST(CpuOps, EncoderShardsSumToTheWholeEmbedding) {
    CpuOps ops;
    const int B = 2, T = 4, C = 3, V = 7;
    const auto wte = random_vector(V * C, 46), wpe = random_vector(T * C, 47), dout = random_vector(B * T * C, 48);
    const auto tokens = random_tokens(B * T, V, 49);
    std::vector<float> whole(B * T * C), dwte_whole(V * C), dwpe_whole(T * C);
    ops.encoder_forward(whole.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    ops.encoder_backward(dwte_whole.data(), dwpe_whole.data(), dout.data(), tokens.data(), B, T, C);

    // rank 0 holds tokens [0,4) and adds positions; rank 1 holds [4,7) without positions
    const VocabShard first{0, 4}, second{4, 3};
    std::vector<float> part0(B * T * C), part1(B * T * C), dwte(V * C), dwpe(T * C);
    ops.encoder_forward(part0.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, first);
    ops.encoder_forward(part1.data(), tokens.data(), wte.data() + 4 * C, nullptr, B, T, C, second);
    ops.encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, first);
    ops.encoder_backward(dwte.data() + 4 * C, nullptr, dout.data(), tokens.data(), B, T, C, second);
    for (int i = 0; i < B * T * C; ++i) EXPECT_FLOAT_EQ(part0[i] + part1[i], whole[i]);
    for (int i = 0; i < V * C; ++i) EXPECT_FLOAT_EQ(dwte[i], dwte_whole[i]);
    for (int i = 0; i < T * C; ++i) EXPECT_FLOAT_EQ(dwpe[i], dwpe_whole[i]);
}

TEST(CpuOps, CrossentropyForwardIsNegativeLogSoftmax) {
    CpuOps ops;
    const int BT = 3, V = 6;
    // large logits: a softmax without the max shift would overflow
    const auto logits = random_vector(BT * V, 50, 80.0f, 100.0f);
    const std::vector<int> targets{0, 5, 2};
    std::vector<float> losses(BT), probs(BT * V);
    ops.crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), BT, V);
    for (int i = 0; i < BT; ++i) {
        const double max = *std::max_element(logits.begin() + i * V, logits.begin() + (i + 1) * V);
        double sum = 0.0;
        for (int v = 0; v < V; ++v) sum += std::exp(logits[i * V + v] - max);
        EXPECT_NEAR(losses[i], std::log(sum) + max - logits[i * V + targets[i]], 1e-5);
        double total = 0.0;
        for (int v = 0; v < V; ++v) {
            EXPECT_NEAR(probs[i * V + v], std::exp(logits[i * V + v] - max) / sum, 1e-6);
            total += probs[i * V + v];
        }
        EXPECT_NEAR(total, 1.0, 1e-6);
    }
}

TEST(CpuOps, CrossentropyBackwardMatchesFiniteDifferences) {
    CpuOps ops;
    const int BT = 4, V = 7;
    auto logits = random_vector(BT * V, 51, -2.0f, 2.0f);
    const auto targets = random_tokens(BT, V, 52);
    const auto dlosses = random_vector(BT, 53, 0.1f, 1.0f);
    std::vector<float> losses(BT), probs(BT * V);
    ops.crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), BT, V);
    auto dlogits = prefilled(BT * V);
    ops.crossentropy_backward(dlogits.data(), dlosses.data(), probs.data(), targets.data(), BT, V);
    const auto loss = [&] {
        ops.crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), BT, V);
        return weighted_sum(losses, dlosses);
    };
    EXPECT_TRUE(matches_finite_differences(logits, minus_prefill(dlogits), loss));
}

TEST(CpuOps, VocabParallelCrossentropyPartsReproduceTheWholeLoss) {
    CpuOps ops;
    const int BT = 5, V = 9, split = 4;  // shard sizes 4 and 5
    const auto logits = random_vector(BT * V, 54, -3.0f, 3.0f);
    const auto targets = random_tokens(BT, V, 55);
    const auto dlosses = random_vector(BT, 56);
    std::vector<float> losses(BT), probs(BT * V), dlogits(BT * V);
    ops.crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), BT, V);
    ops.crossentropy_backward(dlogits.data(), dlosses.data(), probs.data(), targets.data(), BT, V);

    // each "rank" holds its columns of the logits
    const VocabShard shards[2] = {{0, split}, {split, V - split}};
    std::vector<float> local[2];
    for (int r = 0; r < 2; ++r)
        for (int i = 0; i < BT; ++i)
            local[r].insert(local[r].end(), logits.begin() + i * V + shards[r].start,
                            logits.begin() + i * V + shards[r].start + shards[r].size);
    std::vector<float> max[2] = {std::vector<float>(BT), std::vector<float>(BT)};
    std::vector<float> sum[2] = {std::vector<float>(BT), std::vector<float>(BT)};
    std::vector<float> target[2] = {std::vector<float>(BT), std::vector<float>(BT)};
    std::vector<float> global_max(BT), global_sum(BT), global_target(BT);
    for (int r = 0; r < 2; ++r) ops.row_max(max[r].data(), local[r].data(), BT, shards[r].size);
    for (int i = 0; i < BT; ++i) global_max[i] = std::max(max[0][i], max[1][i]);  // allreduce(max)
    for (int r = 0; r < 2; ++r) {
        ops.row_sum_exp(sum[r].data(), local[r].data(), global_max.data(), BT, shards[r].size);
        ops.target_logit(target[r].data(), local[r].data(), targets.data(), BT, shards[r].size, shards[r]);
    }
    for (int i = 0; i < BT; ++i) {  // allreduce(sum)
        global_sum[i] = sum[0][i] + sum[1][i];
        global_target[i] = target[0][i] + target[1][i];
    }
    std::vector<float> shard_losses(BT);
    ops.crossentropy_losses_from_parts(shard_losses.data(), global_max.data(), global_sum.data(),
                                       global_target.data(), BT);
    for (int i = 0; i < BT; ++i) EXPECT_NEAR(shard_losses[i], losses[i], 1e-5);

    for (int r = 0; r < 2; ++r) {
        std::vector<float> dlocal(BT * shards[r].size);
        ops.crossentropy_shard_backward(dlocal.data(), dlosses.data(), local[r].data(), global_max.data(),
                                        global_sum.data(), targets.data(), BT, shards[r].size, shards[r]);
        for (int i = 0; i < BT; ++i)
            for (int v = 0; v < shards[r].size; ++v)
                EXPECT_NEAR(dlocal[i * shards[r].size + v], dlogits[i * V + shards[r].start + v], 1e-6);
    }
}

}  // namespace
}  // namespace parbench

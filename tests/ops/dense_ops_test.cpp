// CpuOps' dense ops: matmul, layernorm, gelu, elementwise, mse and AdamW, forward against
// naive loops and backward against central finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gradient_check.hpp"
#include "kernels/adamw_math.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/skinny_gemm.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

TEST(CpuOps, GradientCheckCatchesAWrongGradient) {
    // The check must be able to fail: a gradient off by 5% is rejected.
    std::vector<float> x = random_vector(8, 1);
    std::vector<float> analytic(8);
    for (std::size_t i = 0; i < x.size(); ++i) analytic[i] = 2.0f * x[i] * 1.05f;
    const auto loss = [&] { return weighted_sum(x, x); };  // sum x^2
    EXPECT_FALSE(matches_finite_differences(x, analytic, loss));
    for (std::size_t i = 0; i < x.size(); ++i) analytic[i] = 2.0f * x[i];
    EXPECT_TRUE(matches_finite_differences(x, analytic, loss));
}

TEST(CpuOps, MatmulForwardMatchesTripleLoop) {
    CpuOps ops;
    const int N = 5, C = 7, OC = 3;  // OC != C: nothing assumes a square weight
    const auto inp = random_vector(N * C, 2), weight = random_vector(OC * C, 3), bias = random_vector(OC, 4);
    std::vector<float> out(N * OC), out_no_bias(N * OC);
    ops.matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
    ops.matmul_forward(out_no_bias.data(), inp.data(), weight.data(), nullptr, N, C, OC);
    for (int n = 0; n < N; ++n)
        for (int o = 0; o < OC; ++o) {
            double sum = 0.0;
            for (int c = 0; c < C; ++c) sum += static_cast<double>(inp[n * C + c]) * weight[o * C + c];
            EXPECT_NEAR(out_no_bias[n * OC + o], sum, 1e-5);
            EXPECT_NEAR(out[n * OC + o], sum + bias[o], 1e-5);
        }
}

TEST(CpuOps, MatmulBackwardMatchesFiniteDifferences) {
    CpuOps ops;
    const int N = 4, C = 6, OC = 5;
    auto inp = random_vector(N * C, 5), weight = random_vector(OC * C, 6), bias = random_vector(OC, 7);
    const auto dout = random_vector(N * OC, 8);
    auto dinp = prefilled(N * C), dweight = prefilled(OC * C), dbias = prefilled(OC);
    ops.matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), N, C, OC);
    std::vector<float> out(N * OC);
    const auto loss = [&] {
        ops.matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
        return weighted_sum(out, dout);
    };
    EXPECT_TRUE(matches_finite_differences(inp, minus_prefill(dinp), loss));
    EXPECT_TRUE(matches_finite_differences(weight, minus_prefill(dweight), loss));
    EXPECT_TRUE(matches_finite_differences(bias, minus_prefill(dbias), loss));
}

TEST(CpuOps, MatmulBackwardSkipsNullGradients) {
    CpuOps ops;
    const int N = 3, C = 4, OC = 2;
    const auto inp = random_vector(N * C, 9), weight = random_vector(OC * C, 10), dout = random_vector(N * OC, 11);
    auto dweight = prefilled(OC * C);
    ops.matmul_backward(nullptr, dweight.data(), nullptr, dout.data(), inp.data(), weight.data(), N, C, OC);
    std::vector<float> full_dinp(N * C), full_dweight(OC * C), full_dbias(OC);
    ops.matmul_backward(full_dinp.data(), full_dweight.data(), full_dbias.data(), dout.data(), inp.data(),
                        weight.data(), N, C, OC);
    const auto accumulated = minus_prefill(dweight);
    for (int i = 0; i < OC * C; ++i) EXPECT_NEAR(accumulated[i], full_dweight[i], 1e-6);
}

TEST(CpuOps, LayernormForwardNormalisesEachRow) {
    CpuOps ops;
    const int N = 3, C = 16;
    const auto inp = random_vector(N * C, 12, -3.0f, 5.0f);
    const std::vector<float> ones(C, 1.0f), zeros(C, 0.0f);
    std::vector<float> out(N * C), mean(N), rstd(N);
    ops.layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), ones.data(), zeros.data(), N, C);
    for (int n = 0; n < N; ++n) {
        double sum = 0.0, squares = 0.0, reference_mean = 0.0;
        for (int c = 0; c < C; ++c) reference_mean += inp[n * C + c] / static_cast<double>(C);
        for (int c = 0; c < C; ++c) {
            sum += out[n * C + c];
            squares += static_cast<double>(out[n * C + c]) * out[n * C + c];
        }
        EXPECT_NEAR(mean[n], reference_mean, 1e-5);
        EXPECT_NEAR(sum / C, 0.0, 1e-5);
        EXPECT_NEAR(squares / C, 1.0, 1e-3);  // eps 1e-5 against a variance of about 5
    }
    // weight scales and bias shifts
    const auto weight = random_vector(C, 13), bias = random_vector(C, 14);
    std::vector<float> affine(N * C);
    ops.layernorm_forward(affine.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C);
    for (int i = 0; i < N * C; ++i) EXPECT_NEAR(affine[i], out[i] * weight[i % C] + bias[i % C], 1e-5);
}

TEST(CpuOps, LayernormBackwardMatchesFiniteDifferences) {
    CpuOps ops;
    const int N = 3, C = 8;
    auto inp = random_vector(N * C, 15), weight = random_vector(C, 16, 0.5f, 1.5f), bias = random_vector(C, 17);
    const auto dout = random_vector(N * C, 18);
    std::vector<float> out(N * C), mean(N), rstd(N);
    ops.layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C);
    auto dinp = prefilled(N * C), dweight = prefilled(C), dbias = prefilled(C);
    ops.layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(),
                           mean.data(), rstd.data(), N, C);
    std::vector<float> scratch_mean(N), scratch_rstd(N);
    const auto loss = [&] {
        ops.layernorm_forward(out.data(), scratch_mean.data(), scratch_rstd.data(), inp.data(), weight.data(),
                              bias.data(), N, C);
        return weighted_sum(out, dout);
    };
    // rstd of a row of U(-1,1) values is about 2, which amplifies float rounding: smaller step
    EXPECT_TRUE(matches_finite_differences(inp, minus_prefill(dinp), loss, {.step = 3e-3}));
    EXPECT_TRUE(matches_finite_differences(weight, minus_prefill(dweight), loss));
    EXPECT_TRUE(matches_finite_differences(bias, minus_prefill(dbias), loss));
}

TEST(CpuOps, GeluBackwardMatchesFiniteDifferences) {
    CpuOps ops;
    const std::size_t n = 40;
    auto inp = random_vector(n, 19, -3.0f, 3.0f);
    const auto dout = random_vector(n, 20);
    auto dinp = prefilled(n);
    ops.gelu_backward(dinp.data(), inp.data(), dout.data(), n);
    std::vector<float> out(n);
    const auto loss = [&] {
        ops.gelu_forward(out.data(), inp.data(), n);
        return weighted_sum(out, dout);
    };
    EXPECT_TRUE(matches_finite_differences(inp, minus_prefill(dinp), loss));
}

TEST(CpuOps, Elementwise) {
    CpuOps ops;
    const auto a = random_vector(10, 21), b = random_vector(10, 22);
    std::vector<float> out(10);
    ops.residual_forward(out.data(), a.data(), b.data(), 10);
    for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(out[i], a[i] + b[i]);
    ops.add_inplace(out.data(), a.data(), 10);
    for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(out[i], (a[i] + b[i]) + a[i]);
    ops.scale(out.data(), 0.5f, 10);
    for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(out[i], ((a[i] + b[i]) + a[i]) * 0.5f);
    ops.fill(out.data(), -2.0f, 10);
    for (float value : out) EXPECT_EQ(value, -2.0f);
}

TEST(CpuOps, MseForwardAndBackward) {
    CpuOps ops;
    const int N = 3, D = 5;
    auto pred = random_vector(N * D, 23);
    const auto target = random_vector(N * D, 24), dlosses = random_vector(N, 25);
    std::vector<float> losses(N);
    ops.mse_forward(losses.data(), pred.data(), target.data(), N, D);
    for (int n = 0; n < N; ++n) {
        double sum = 0.0;
        for (int d = 0; d < D; ++d) sum += std::pow(pred[n * D + d] - target[n * D + d], 2.0);
        EXPECT_NEAR(losses[n], sum / D, 1e-6);
    }
    auto dpred = prefilled(N * D);
    ops.mse_backward(dpred.data(), dlosses.data(), pred.data(), target.data(), N, D);
    const auto loss = [&] {
        ops.mse_forward(losses.data(), pred.data(), target.data(), N, D);
        return weighted_sum(losses, dlosses);
    };
    EXPECT_TRUE(matches_finite_differences(pred, minus_prefill(dpred), loss));
}

TEST(CpuOps, AdamWUpdatesEveryElementLikeTheFormula) {
    CpuOps ops;
    const std::size_t n = 6;
    auto params = random_vector(n, 26), m = random_vector(n, 27, -0.1f, 0.1f), v = random_vector(n, 28, 0.0f, 0.01f);
    const auto grads = random_vector(n, 29);
    auto expected_p = params, expected_m = m, expected_v = v;
    ops.adamw_update(params.data(), grads.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3);
    for (std::size_t i = 0; i < n; ++i) {
        // in double, straight from the definition
        const double em = 0.9 * expected_m[i] + 0.1 * grads[i];
        const double ev = 0.95 * expected_v[i] + 0.05 * static_cast<double>(grads[i]) * grads[i];
        const double m_hat = em / (1 - std::pow(0.9, 3)), v_hat = ev / (1 - std::pow(0.95, 3));
        const double ep = expected_p[i] - 1e-3 * (m_hat / (std::sqrt(v_hat) + 1e-8) + 0.1 * expected_p[i]);
        // relative: 1 - beta in float carries a relative error up to 1e-5 (1 - 0.95 is 0.050000012)
        EXPECT_NEAR(m[i], em, std::abs(em) * 1e-5 + 1e-9);
        EXPECT_NEAR(v[i], ev, ev * 2e-5 + 1e-12);
        EXPECT_NEAR(params[i], ep, 1e-6);
    }
}

// The overwrite forms write what the += forms add to a zeroed buffer, whatever the buffer held
// (NaN here: a form that read it would spread it), bit for bit; parameter gradients still +=.
TEST(CpuOps, OverwriteFormsEqualTheAccumulatingFormsOnZeroedBuffers) {
    CpuOps ops;
    const float garbage = std::nanf("");
    const int N = 5, C = 37, OC = 19;  // 37: a remainder after 16-wide loops
    const auto inp = random_vector(N * C, 40), weight = random_vector(OC * C, 41), dout = random_vector(N * OC, 42);
    std::vector<float> zeroed(N * C, 0.0f), written(N * C, garbage);
    auto dweight = prefilled(OC * C), dweight_overwrite = prefilled(OC * C);
    auto dbias = prefilled(OC), dbias_overwrite = prefilled(OC);
    ops.matmul_backward(zeroed.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), N, C, OC);
    ops.matmul_backward_overwrite_input(written.data(), dweight_overwrite.data(), dbias_overwrite.data(), dout.data(),
                                        inp.data(), weight.data(), N, C, OC);
    EXPECT_EQ(written, zeroed);
    EXPECT_EQ(dweight_overwrite, dweight);
    EXPECT_EQ(dbias_overwrite, dbias);

    const std::size_t n = 37;
    const auto x = random_vector(n, 43), gate = random_vector(n, 44), up = random_vector(n, 45),
               dy = random_vector(n, 46);
    std::vector<float> gelu_zeroed(n, 0.0f), gelu_written(n, garbage);
    ops.gelu_backward(gelu_zeroed.data(), x.data(), dy.data(), n);
    ops.gelu_backward_overwrite(gelu_written.data(), x.data(), dy.data(), n);
    EXPECT_EQ(gelu_written, gelu_zeroed);
    std::vector<float> dgate(n, 0.0f), dup(n, 0.0f), dgate_written(n, garbage), dup_written(n, garbage);
    ops.swiglu_backward(dgate.data(), dup.data(), dy.data(), gate.data(), up.data(), n);
    ops.swiglu_backward_overwrite(dgate_written.data(), dup_written.data(), dy.data(), gate.data(), up.data(), n);
    EXPECT_EQ(dgate_written, dgate);
    EXPECT_EQ(dup_written, dup);

    // a vocabulary shard [3, 40) of 37 logits: one target inside it, one outside
    const int BT = 2, V = 37;
    const VocabShard shard{3, V};
    const auto logits = random_vector(BT * V, 47);
    const std::vector<int> targets{10, 1};
    std::vector<float> maxes(BT), sums(BT), dlosses{0.5f, 0.25f};
    ops.row_max(maxes.data(), logits.data(), BT, V);
    ops.row_sum_exp(sums.data(), logits.data(), maxes.data(), BT, V);
    std::vector<float> dlogits(BT * V, 0.0f), dlogits_written(BT * V, garbage);
    ops.crossentropy_shard_backward(dlogits.data(), dlosses.data(), logits.data(), maxes.data(), sums.data(),
                                    targets.data(), BT, V, shard);
    ops.crossentropy_shard_backward_overwrite(dlogits_written.data(), dlosses.data(), logits.data(), maxes.data(),
                                              sums.data(), targets.data(), BT, V, shard);
    EXPECT_EQ(dlogits_written, dlogits);
}

// The MLP's optimizer fused with its weight gradient (train/models/mlp.cpp) computes the
// gradient piece by piece into a buffer holding anything: each piece must be those rows of the
// whole gradient added to zeros (pieces of 7 rows of 19: a short last piece; C = 37 a remainder
// after 16-wide loops). The same bits where skinny_gemm computes both (each element one FMA chain
// over the summed index, whatever the piece: skinny_gemm.hpp), so the fused update equals the
// unfused one there. OpenBLAS picks its kernels and blocking by the shape, so a piece of 7 rows
// may sum in another order than the whole's 19 (its Haswell and Zen kernels do, as on an AMD EPYC
// with AVX-512: row 0, column 8 one ulp apart): there each element is within what two orders of
// a sum of N products can differ by, 2 γ_N Σ|dout·inp|, γ_N = N u / (1 - N u) (Higham,
// "Accuracy and Stability of Numerical Algorithms", sec. 3.1).
TEST(CpuOps, WeightGradientRowsAreTheRowsOfTheWholeWeightGradient) {
    CpuOps ops;
    ASSERT_TRUE(ops.has_weight_gradient_rows());
    const int N = 64, C = 37, OC = 19, piece_rows = 7;
    const auto inp = random_vector(N * C, 50), dout = random_vector(N * OC, 51);
    std::vector<float> whole(OC * C, 0.0f);
    ops.matmul_backward(nullptr, whole.data(), nullptr, dout.data(), inp.data(), nullptr, N, C, OC);
    const bool same_bits = skinny_gemm::suits(ops.kernels(), N);
    const double unit_roundoff = std::ldexp(1.0, -24), gamma = N * unit_roundoff / (1.0 - N * unit_roundoff);
    for (int first = 0; first < OC; first += piece_rows) {
        const int rows = std::min(piece_rows, OC - first);
        std::vector<float> piece(static_cast<std::size_t>(piece_rows * C), std::nanf(""));
        ops.matmul_weight_gradient_rows(piece.data(), dout.data(), inp.data(), N, C, OC, first, rows);
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < C; ++c) {
                const float got = piece[static_cast<std::size_t>(r * C + c)];
                const float expected = whole[static_cast<std::size_t>((first + r) * C + c)];
                if (same_bits) {
                    ASSERT_EQ(got, expected) << "row " << first + r << ", column " << c;
                    continue;
                }
                double magnitude = 0.0;
                for (int n = 0; n < N; ++n)
                    magnitude += std::abs(static_cast<double>(dout[static_cast<std::size_t>(n * OC + first + r)]) *
                                          inp[static_cast<std::size_t>(n * C + c)]);
                ASSERT_NEAR(got, expected, 2.0 * gamma * magnitude) << "row " << first + r << ", column " << c;
            }
    }
}

// Its input-gradient share (Ops::matmul_input_gradient_rows): pieces of one skinny_gemm band (256 rows), the first
// overwriting a buffer of NaNs and the rest adding, give matmul_backward_overwrite_input's input
// gradient: its bits where skinny_gemm suits, within rounding where OpenBLAS sums them.
TEST(CpuOps, InputGradientRowsAddUpToTheWholeInputGradient) {
    CpuOps ops;
    const int N = 64, C = 37, OC = 600;
    const auto weight = random_vector(OC * C, 52), dout = random_vector(N * OC, 53);
    std::vector<float> whole(N * C), pieces(N * C, std::nanf(""));
    ops.matmul_backward_overwrite_input(whole.data(), nullptr, nullptr, dout.data(), nullptr, weight.data(), N, C, OC);
    const int band = skinny_gemm::input_gradient_band_rows;
    for (int first = 0; first < OC; first += band)
        ops.matmul_input_gradient_rows(pieces.data(), dout.data(), weight.data(), N, C, OC, first,
                                       std::min(band, OC - first), first > 0);
    if (skinny_gemm::suits(ops.kernels(), N))
        EXPECT_EQ(pieces, whole);
    else
        EXPECT_TRUE(all_close(pieces, whole, 1e-5, 1e-5));
}

// The DDP scheme's update: the same bits as adamw_update (every vector width: n = 37 leaves a
// remainder after 16- and 8-wide loops), and the gradients left zero for the next step.
TEST(CpuOps, AdamWClearingGradsUpdatesLikeAdamWAndZeroesTheGradients) {
    CpuOps ops;
    const std::size_t n = 37;
    auto params = random_vector(n, 30), m = random_vector(n, 31, -0.1f, 0.1f), v = random_vector(n, 32, 0.0f, 0.01f);
    auto grads = random_vector(n, 33);
    auto expected_p = params, expected_m = m, expected_v = v;
    ops.adamw_update(expected_p.data(), grads.data(), expected_m.data(), expected_v.data(), n, 1e-3f, 0.9f, 0.95f,
                     1e-8f, 0.1f, 4);
    ops.adamw_update_clearing_grads(params.data(), grads.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f,
                                    0.1f, 4);
    EXPECT_EQ(params, expected_p);
    EXPECT_EQ(m, expected_m);
    EXPECT_EQ(v, expected_v);
    EXPECT_EQ(grads, std::vector<float>(n, 0.0f));
}

// The grad norm's variants: the same update bits as adamw_update (in pieces of 4096, so n spans
// three and a remainder), and the sum of the gradients' squares within float rounding of a
// double sum; sum_of_squares alone gives the same sum.
TEST(CpuOps, AdamWSummingSquaresUpdatesLikeAdamWAndSumsTheSquares) {
    CpuOps ops;
    const std::size_t n = 3 * 4096 + 37;
    auto params = random_vector(n, 40), m = random_vector(n, 41, -0.1f, 0.1f), v = random_vector(n, 42, 0.0f, 0.01f);
    const auto grads = random_vector(n, 43);
    double reference = 0.0;
    for (float g : grads) reference += static_cast<double>(g) * g;
    auto expected_p = params, expected_m = m, expected_v = v;
    ops.adamw_update(expected_p.data(), grads.data(), expected_m.data(), expected_v.data(), n, 1e-3f, 0.9f, 0.95f,
                     1e-8f, 0.1f, 4);
    auto summed_p = params, summed_m = m, summed_v = v;
    const double squares = ops.adamw_update_squares(summed_p.data(), grads.data(), summed_m.data(), summed_v.data(), n,
                                                    1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 4);
    EXPECT_EQ(summed_p, expected_p);
    EXPECT_EQ(summed_m, expected_m);
    EXPECT_EQ(summed_v, expected_v);
    EXPECT_NEAR(squares, reference, 1e-6 * reference);
    auto cleared = grads;
    const double cleared_squares = ops.adamw_update_clearing_grads_squares(
        params.data(), cleared.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 4);
    EXPECT_EQ(params, expected_p);
    EXPECT_EQ(cleared, std::vector<float>(n, 0.0f));
    EXPECT_EQ(cleared_squares, squares);
    EXPECT_EQ(ops.sum_of_squares(grads.data(), n), squares);
}

}  // namespace
}  // namespace parbench

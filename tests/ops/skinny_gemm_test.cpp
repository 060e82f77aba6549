// skinny_gemm's three products against a triple loop in double, over shapes that leave partial
// tiles (rows not a multiple of 6, batches and columns not of 16, weights taller than a band), and the
// properties CpuOps relies on: beta 0 never reads the output, and a result's bits do not
// depend on the batch size or on which piece of the weight gradient it was computed in.
#include "train/ops/skinny_gemm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gradient_check.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

// Sums of up to 1024 products of values in [-1, 1], rounded in float: a few 1e-6 off.
constexpr double absolute_tolerance = 1e-4, relative_tolerance = 1e-5;

std::size_t at(int row, int ld, int column) {
    return static_cast<std::size_t>(row) * static_cast<std::size_t>(ld) + static_cast<std::size_t>(column);
}

class SkinnyGemm : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!skinny_gemm::runs_here()) GTEST_SKIP() << "this CPU lacks AVX2 or FMA: CpuOps uses OpenBLAS throughout";
    }
    skinny_gemm::Scratch scratch_;
};

// Only on the avx2 path: the avx512 path keeps OpenBLAS's 16-wide kernels, the baseline has no FMA.
TEST_F(SkinnyGemm, SuitsOnlyAFewRowsOnTheAvx2Path) {
    EXPECT_TRUE(skinny_gemm::suits(CpuKernels::avx2, 64));
    EXPECT_TRUE(skinny_gemm::suits(CpuKernels::avx2, 128));
    EXPECT_FALSE(skinny_gemm::suits(CpuKernels::avx2, 129));
    EXPECT_FALSE(skinny_gemm::suits(CpuKernels::avx2, 4096));
    EXPECT_FALSE(skinny_gemm::suits(CpuKernels::avx512, 64));
    EXPECT_FALSE(skinny_gemm::suits(CpuKernels::baseline, 64));
}

TEST_F(SkinnyGemm, ForwardMatchesTripleLoop) {
    for (int N : {1, 5, 16, 17, 64, 128})
        for (int C : {1, 33, 1024})
            for (int OC : {1, 5, 13, 64}) {
                SCOPED_TRACE(::testing::Message() << "N " << N << " C " << C << " OC " << OC);
                const auto inp = random_vector(at(N, C, 0), 1), weight = random_vector(at(OC, C, 0), 2),
                           bias = random_vector(static_cast<std::size_t>(OC), 3);
                std::vector<float> expected(at(N, OC, 0)), expected_biased(at(N, OC, 0));
                for (int n = 0; n < N; ++n)
                    for (int o = 0; o < OC; ++o) {
                        double sum = 0.0;
                        for (int c = 0; c < C; ++c) sum += static_cast<double>(inp[at(n, C, c)]) * weight[at(o, C, c)];
                        expected[at(n, OC, o)] = static_cast<float>(sum);
                        expected_biased[at(n, OC, o)] = static_cast<float>(sum + bias[static_cast<std::size_t>(o)]);
                    }
                std::vector<float> out(at(N, OC, 0), std::numeric_limits<float>::quiet_NaN());
                skinny_gemm::forward(out.data(), inp.data(), weight.data(), nullptr, N, C, OC, scratch_);
                EXPECT_TRUE(all_close(out, expected, absolute_tolerance, relative_tolerance));
                skinny_gemm::forward(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC, scratch_);
                EXPECT_TRUE(all_close(out, expected_biased, absolute_tolerance, relative_tolerance));
            }
}

TEST_F(SkinnyGemm, InputGradientMatchesTripleLoop) {
    // OC 300: two bands of the weight's rows, the second partial.
    for (int N : {1, 7, 64})
        for (int C : {16, 37, 1024})
            for (int OC : {1, 7, 300}) {
                SCOPED_TRACE(::testing::Message() << "N " << N << " C " << C << " OC " << OC);
                const auto dout = random_vector(at(N, OC, 0), 4), weight = random_vector(at(OC, C, 0), 5);
                std::vector<float> product(at(N, C, 0)), plus_prefill(at(N, C, 0));
                for (int n = 0; n < N; ++n)
                    for (int c = 0; c < C; ++c) {
                        double sum = 0.0;
                        for (int o = 0; o < OC; ++o) sum += static_cast<double>(dout[at(n, OC, o)]) * weight[at(o, C, c)];
                        product[at(n, C, c)] = static_cast<float>(sum);
                        plus_prefill[at(n, C, c)] = static_cast<float>(sum + 0.5);
                    }
                std::vector<float> dinp(at(N, C, 0), std::numeric_limits<float>::quiet_NaN());
                skinny_gemm::input_gradient(dinp.data(), 0.0f, dout.data(), weight.data(), N, C, OC, 0, OC, scratch_);
                EXPECT_TRUE(all_close(dinp, product, absolute_tolerance, relative_tolerance));
                std::fill(dinp.begin(), dinp.end(), 0.5f);
                skinny_gemm::input_gradient(dinp.data(), 1.0f, dout.data(), weight.data(), N, C, OC, 0, OC, scratch_);
                EXPECT_TRUE(all_close(dinp, plus_prefill, absolute_tolerance, relative_tolerance));
            }
}

TEST_F(SkinnyGemm, WeightGradientPiecesMatchTripleLoop) {
    const int N = 37, C = 43, OC = 29;
    const auto dout = random_vector(at(N, OC, 0), 6), inp = random_vector(at(N, C, 0), 7);
    // A piece of rows [first, first + rows) of dweight, alone, then added onto 0.5.
    for (const auto& [first, rows] : {std::pair{0, OC}, std::pair{5, 7}, std::pair{28, 1}}) {
        SCOPED_TRACE(::testing::Message() << "rows " << first << " + " << rows);
        std::vector<float> product(at(rows, C, 0)), plus_prefill(at(rows, C, 0));
        for (int o = 0; o < rows; ++o)
            for (int c = 0; c < C; ++c) {
                double sum = 0.0;
                for (int n = 0; n < N; ++n) sum += static_cast<double>(dout[at(n, OC, first + o)]) * inp[at(n, C, c)];
                product[at(o, C, c)] = static_cast<float>(sum);
                plus_prefill[at(o, C, c)] = static_cast<float>(sum + 0.5);
            }
        std::vector<float> dweight(at(rows, C, 0), std::numeric_limits<float>::quiet_NaN());
        skinny_gemm::weight_gradient(dweight.data(), 0.0f, dout.data(), inp.data(), N, C, OC, first, rows, scratch_);
        EXPECT_TRUE(all_close(dweight, product, absolute_tolerance, relative_tolerance));
        std::fill(dweight.begin(), dweight.end(), 0.5f);
        skinny_gemm::weight_gradient(dweight.data(), 1.0f, dout.data(), inp.data(), N, C, OC, first, rows, scratch_);
        EXPECT_TRUE(all_close(dweight, plus_prefill, absolute_tolerance, relative_tolerance));
    }
}

// The MLP's fused update reads each piece of the weight for the input gradient right before
// updating it: pieces from multiples of the band, added in order, are the whole's bits.
TEST_F(SkinnyGemm, InputGradientPiecesAddUpToTheWholeBits) {
    const int N = 64, C = 40, OC = 600;
    const auto dout = random_vector(at(N, OC, 0), 16), weight = random_vector(at(OC, C, 0), 17);
    std::vector<float> whole(at(N, C, 0)), pieces(at(N, C, 0), std::numeric_limits<float>::quiet_NaN());
    skinny_gemm::input_gradient(whole.data(), 0.0f, dout.data(), weight.data(), N, C, OC, 0, OC, scratch_);
    const int band = skinny_gemm::input_gradient_band_rows;
    for (int first = 0; first < OC; first += band)
        skinny_gemm::input_gradient(pieces.data(), first == 0 ? 0.0f : 1.0f, dout.data(), weight.data(), N, C, OC,
                                    first, std::min(band, OC - first), scratch_);
    EXPECT_EQ(pieces, whole);
}

TEST_F(SkinnyGemm, ForwardBitsDoNotDependOnTheBatch) {
    const int N = 23, C = 1024, OC = 13;
    const auto inp = random_vector(at(N, C, 0), 8), weight = random_vector(at(OC, C, 0), 9),
               bias = random_vector(static_cast<std::size_t>(OC), 10);
    std::vector<float> batch(at(N, OC, 0)), alone(static_cast<std::size_t>(OC));
    skinny_gemm::forward(batch.data(), inp.data(), weight.data(), bias.data(), N, C, OC, scratch_);
    for (int n = 0; n < N; ++n) {
        skinny_gemm::forward(alone.data(), inp.data() + at(n, C, 0), weight.data(), bias.data(), 1, C, OC, scratch_);
        for (int o = 0; o < OC; ++o) ASSERT_EQ(alone[static_cast<std::size_t>(o)], batch[at(n, OC, o)]) << n << ", " << o;
    }
}

TEST_F(SkinnyGemm, WeightGradientBitsDoNotDependOnThePiece) {
    const int N = 64, C = 40, OC = 20;
    const auto dout = random_vector(at(N, OC, 0), 11), inp = random_vector(at(N, C, 0), 12);
    std::vector<float> whole(at(OC, C, 0)), piece(at(3, C, 0));
    skinny_gemm::weight_gradient(whole.data(), 0.0f, dout.data(), inp.data(), N, C, OC, 0, OC, scratch_);
    for (int first = 0; first + 3 <= OC; first += 3) {
        skinny_gemm::weight_gradient(piece.data(), 0.0f, dout.data(), inp.data(), N, C, OC, first, 3, scratch_);
        for (int o = 0; o < 3; ++o)
            for (int c = 0; c < C; ++c) ASSERT_EQ(piece[at(o, C, c)], whole[at(first + o, C, c)]) << first + o << ", " << c;
    }
}

// The copy of inp is reused only by the piece that continues the previous one: a first piece,
// or a piece elsewhere, copies inp again (here changed in place between the calls).
TEST_F(SkinnyGemm, WeightGradientCopiesAChangedInputForANewGradient) {
    const int N = 16, C = 32, OC = 12;
    const auto dout = random_vector(at(N, OC, 0), 13);
    auto inp = random_vector(at(N, C, 0), 14);
    const auto changed = random_vector(at(N, C, 0), 15);
    std::vector<float> expected(at(OC, C, 0)), piece(at(3, C, 0));
    skinny_gemm::weight_gradient(expected.data(), 0.0f, dout.data(), changed.data(), N, C, OC, 0, OC, scratch_);
    for (const int first : {0, 6}) {
        SCOPED_TRACE(::testing::Message() << "a piece at row " << first << " after rows 0-2 of another input");
        skinny_gemm::weight_gradient(piece.data(), 0.0f, dout.data(), inp.data(), N, C, OC, 0, 3, scratch_);
        const std::vector<float> current = inp;
        std::copy(changed.begin(), changed.end(), inp.begin());  // in place: the same address
        skinny_gemm::weight_gradient(piece.data(), 0.0f, dout.data(), inp.data(), N, C, OC, first, 3, scratch_);
        for (int o = 0; o < 3; ++o)
            for (int c = 0; c < C; ++c) ASSERT_EQ(piece[at(o, C, c)], expected[at(first + o, C, c)]) << o << ", " << c;
        std::copy(current.begin(), current.end(), inp.begin());
    }
}

}  // namespace
}  // namespace parbench

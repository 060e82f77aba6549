// compare's noise verdict (report/compare.hpp): the bootstrap interval of a busbw ratio from
// two reports' per-iteration samples.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "report/compare.hpp"

namespace parbench {
namespace {

std::vector<double> tight(double scale) {
    std::vector<double> samples;
    for (int k = 0; k < 20; ++k) samples.push_back(scale * (100.0 + (k % 5) * 0.5));
    return samples;
}

TEST(CompareNoise, SameSamplesAreWithinTheNoise) {
    const NoiseVerdict verdict = detail::bootstrap_ratio(tight(1), tight(1), 1.0, false, 0.95, 2000, 7);
    ASSERT_TRUE(verdict.judged);
    EXPECT_LE(verdict.low, 1.0);
    EXPECT_GE(verdict.high, 1.0);
    EXPECT_FALSE(verdict.beyond());
}

TEST(CompareNoise, TwiceTheTimeIsBeyondTheNoise) {
    const NoiseVerdict verdict = detail::bootstrap_ratio(tight(1), tight(2), 0.5, false, 0.95, 2000, 7);
    ASSERT_TRUE(verdict.judged);
    EXPECT_NEAR(verdict.low, 0.5, 0.01);
    EXPECT_NEAR(verdict.high, 0.5, 0.01);
    EXPECT_TRUE(verdict.beyond());
}

TEST(CompareNoise, SpreadSamplesHideAModestDrop) {
    std::vector<double> spread;
    for (int k = 0; k < 10; ++k) spread.insert(spread.end(), {60.0, 190.0});  // median 125
    const NoiseVerdict verdict = detail::bootstrap_ratio(tight(1), spread, 101.0 / 125.0, false, 0.95, 2000, 7);
    ASSERT_TRUE(verdict.judged);
    EXPECT_LT(verdict.low, 0.6);
    EXPECT_GT(verdict.high, 1.5);
    EXPECT_FALSE(verdict.beyond());
}

TEST(CompareNoise, TheSameSeedGivesTheSameInterval) {
    std::vector<double> noisy{90, 140, 100, 300, 95, 120, 101, 99};
    const NoiseVerdict first = detail::bootstrap_ratio(tight(1), noisy, 0.9, false, 0.9, 500, 42);
    const NoiseVerdict again = detail::bootstrap_ratio(tight(1), noisy, 0.9, false, 0.9, 500, 42);
    EXPECT_EQ(first.low, again.low);
    EXPECT_EQ(first.high, again.high);
}

TEST(CompareNoise, ALowerConfidenceNarrowsTheInterval) {
    std::vector<double> noisy{90, 140, 100, 300, 95, 120, 101, 99, 130, 85};
    const NoiseVerdict wide = detail::bootstrap_ratio(tight(1), noisy, 0.9, false, 0.99, 2000, 3);
    const NoiseVerdict narrow = detail::bootstrap_ratio(tight(1), noisy, 0.9, false, 0.6, 2000, 3);
    EXPECT_LE(wide.low, narrow.low);
    EXPECT_GE(wide.high, narrow.high);
    EXPECT_LT(narrow.high - narrow.low, wide.high - wide.low);
}

TEST(CompareNoise, TooFewOrUnusableSamplesAreNotJudged) {
    EXPECT_FALSE(detail::bootstrap_ratio({100.0}, tight(1), 1.0, false, 0.95, 100, 1).judged);
    EXPECT_FALSE(detail::bootstrap_ratio(tight(1), {}, 1.0, false, 0.95, 100, 1).judged);
    EXPECT_FALSE(detail::bootstrap_ratio({0.0, 0.0}, tight(1), 1.0, false, 0.95, 100, 1).judged);
    EXPECT_FALSE(detail::bootstrap_ratio(tight(1), tight(1), std::numeric_limits<double>::quiet_NaN(), false, 0.95,
                                         100, 1).judged);
    const double huge = std::numeric_limits<double>::max();
    EXPECT_FALSE(detail::bootstrap_ratio({huge, huge}, tight(1), 1.0, true, 0.95, 100, 1).judged);
}

}  // namespace
}  // namespace parbench

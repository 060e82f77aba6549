#include "bench/statistics.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace parbench {
namespace {

TEST(Statistics, SummaryOfLiteralSamples) {
    const std::vector<double> samples{4.0, 1.0, 3.0, 2.0, 5.0};
    const Summary summary = summarize(samples);
    EXPECT_EQ(summary.count, 5u);
    EXPECT_DOUBLE_EQ(summary.mean, 3.0);
    EXPECT_DOUBLE_EQ(summary.median, 3.0);
    EXPECT_DOUBLE_EQ(summary.min, 1.0);
    EXPECT_DOUBLE_EQ(summary.max, 5.0);
    EXPECT_DOUBLE_EQ(summary.p95, 4.8);  // 0.95 * 4 = 3.8 -> 4 + 0.8 * (5 - 4)
    ASSERT_TRUE(summary.stddev.has_value());
    EXPECT_NEAR(*summary.stddev, 1.5811388300841898, 1e-12);
}

TEST(Statistics, MedianOfEvenCountInterpolates) {
    const std::vector<double> samples{10.0, 20.0, 30.0, 40.0};
    EXPECT_DOUBLE_EQ(summarize(samples).median, 25.0);
}

TEST(Statistics, OneSampleHasNoStddev) {
    const std::vector<double> samples{7.0};
    const Summary summary = summarize(samples);
    EXPECT_FALSE(summary.stddev.has_value());
    EXPECT_DOUBLE_EQ(summary.p95, 7.0);
}

TEST(Statistics, OutliersByModifiedZScore) {
    const std::vector<double> samples{10, 10.5, 9.5, 10.2, 9.8, 10.1, 9.9, 100};
    EXPECT_EQ(count_outliers(samples), 1u);
    const std::vector<double> flat{5, 5, 5, 5};
    EXPECT_EQ(count_outliers(flat), 0u);
}

TEST(Statistics, WarnsAboutSlowFirstSampleAndSpread) {
    std::vector<double> samples(20, 10.0);
    samples[3] = 10.5;
    EXPECT_TRUE(sample_warnings(samples).empty());
    samples.front() = 80.0;
    const auto warnings = sample_warnings(samples);
    ASSERT_FALSE(warnings.empty());
    EXPECT_NE(warnings.back().find("--warmup"), std::string::npos);
    std::vector<double> bimodal;
    for (int i = 0; i < 20; ++i) bimodal.push_back(i % 2 ? 10.0 : 30.0);
    EXPECT_FALSE(sample_warnings(bimodal).empty());
    const auto for_training = sample_warnings(bimodal, SampleFlags{"--steps", "--warmup"});
    ASSERT_FALSE(for_training.empty());
    EXPECT_NE(for_training.front().find("raise --steps"), std::string::npos) << for_training.front();
}

}  // namespace
}  // namespace parbench

// compare's run-to-run noise (report/point_runs.hpp): the t quantiles it takes, the interval
// from the runs of a point, and several reports merged into one column.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "report/point_runs.hpp"

namespace parbench {
namespace {

TEST(PointRuns, StudentTQuantilesMatchTheTables) {
    EXPECT_NEAR(detail::student_t_quantile(0.975, 1), 12.7062, 1e-3);
    EXPECT_NEAR(detail::student_t_quantile(0.975, 4), 2.7764, 1e-4);
    EXPECT_NEAR(detail::student_t_quantile(0.995, 10), 3.1693, 1e-4);
    EXPECT_NEAR(detail::student_t_quantile(0.9995, 8), 5.0413, 1e-3);
    EXPECT_NEAR(detail::student_t_quantile(0.975, 1000), 1.9623, 1e-3);
    EXPECT_NEAR(detail::student_t_quantile(0.025, 4), -2.7764, 1e-4);
}

TEST(PointRuns, BonferroniSplitsTheConfidence) {
    EXPECT_DOUBLE_EQ(per_interval_confidence(0.95, 1), 0.95);
    EXPECT_NEAR(per_interval_confidence(0.95, 10), 0.995, 1e-12);
}

// Runs a few per cent apart, the other column 30 % slower: its busbw 0.77x, beyond the noise.
TEST(PointRuns, ASlowdownBeyondTheRunsSpreadIsBeyond) {
    const std::vector<double> first{100, 103, 98, 101, 99};
    const std::vector<double> slower{130, 134, 128, 131, 129};
    const NoiseVerdict verdict = between_runs_ratio(first, slower, 100.0 / 130.0, 0.95);
    ASSERT_TRUE(verdict.judged);
    EXPECT_EQ(verdict.source, NoiseSource::between_runs);
    EXPECT_TRUE(verdict.beyond());
    EXPECT_LT(verdict.high, 0.9);
    EXPECT_GT(verdict.low, 0.65);
    EXPECT_EQ(verdict.runs, (std::pair<std::size_t, std::size_t>{5, 5}));
}

// Runs that differ by 30 % among themselves: a 10 % difference between columns is within them.
TEST(PointRuns, RunsThatDifferWidelyHideAModestDrop) {
    const std::vector<double> first{100, 130, 90, 120, 95};
    const std::vector<double> other{110, 140, 100, 125, 105};
    const NoiseVerdict verdict = between_runs_ratio(first, other, 0.91, 0.95);
    ASSERT_TRUE(verdict.judged);
    EXPECT_FALSE(verdict.beyond());
    EXPECT_GT(verdict.high, 1.0);
}

// A run a rank was descheduled through reads hundreds of times the others: left out, said so.
TEST(PointRuns, AnInterruptedRunIsLeftOut) {
    const std::vector<double> first{16.0, 17.0, 16.5, 17.1, 16.8};
    const std::vector<double> other{23.0, 24.0, 7890.0, 23.5, 24.2};
    const NoiseVerdict verdict = between_runs_ratio(first, other, 0.7, 0.95);
    ASSERT_TRUE(verdict.judged);
    EXPECT_EQ(verdict.interrupted, 1u);
    EXPECT_EQ(verdict.runs, (std::pair<std::size_t, std::size_t>{5, 4}));
    EXPECT_TRUE(verdict.beyond());
    EXPECT_LT(verdict.high, 0.8);
}

// One run a side has no spread between runs to judge by; one side with runs is enough.
TEST(PointRuns, OneRunASideIsNotJudged) {
    EXPECT_FALSE(between_runs_ratio({100}, {130}, 0.77, 0.95).judged);
    EXPECT_TRUE(between_runs_ratio({100, 102, 99}, {130}, 0.77, 0.95).judged);
    EXPECT_FALSE(between_runs_ratio({100, 0}, {130, 131}, 0.77, 0.95).judged);
}

// A stricter confidence (more points judged together) widens the interval.
TEST(PointRuns, MorePointsTogetherWidenEachInterval) {
    const std::vector<double> first{100, 104, 97, 101, 99};
    const std::vector<double> other{110, 113, 108, 112, 111};
    const NoiseVerdict one = between_runs_ratio(first, other, 0.9, per_interval_confidence(0.95, 1));
    const NoiseVerdict many = between_runs_ratio(first, other, 0.9, per_interval_confidence(0.95, 400));
    EXPECT_LT(many.low, one.low);
    EXPECT_GT(many.high, one.high);
}

nlohmann::json report_of(std::vector<nlohmann::json> results, const char* status = "complete") {
    return {{"schema", "parbench.report/v1"}, {"command", "allreduce"}, {"status", status}, {"results", results}};
}

nlohmann::json point(double time_us, std::optional<int> repetition = std::nullopt) {
    nlohmann::json entry = {{"collective", "allreduce"}, {"bytes", 1024u},  {"dtype", "float32"},
                            {"op", "sum"},               {"inplace", false}, {"busbw_gbps", 1024.0 / time_us / 1e3},
                            {"time_us", {{"median", time_us}}}};
    if (repetition) entry["repetition"] = *repetition;
    return entry;
}

TEST(PointRuns, MergedReportsNumberTheirSweepsOn) {
    const LabelledReport once{"a.json", report_of({point(10)})};
    const LabelledReport twice{"b.json", report_of({point(11, 1), point(12, 2)})};
    const LabelledReport merged = merge_runs("a.json +1", {once, twice}, false);
    ASSERT_EQ(merged.document["results"].size(), 3u);
    EXPECT_EQ(merged.document["results"][0]["repetition"], 1);
    EXPECT_EQ(merged.document["results"][1]["repetition"], 2);
    EXPECT_EQ(merged.document["results"][2]["repetition"], 3);
    const LabelledReport failed{"c.json", report_of({point(10)}, "failed")};
    EXPECT_THROW(merge_runs("a.json +1", {once, failed}, false), UsageError);
}

}  // namespace
}  // namespace parbench

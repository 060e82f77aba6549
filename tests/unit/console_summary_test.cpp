// The closing lines of a collective run from literal summaries: what the average is over, the
// warning tally, nccl-tests' two lines and the --min-busbw gate (issue 22).
#include <gtest/gtest.h>

#include <sstream>

#include "report/collective_result.hpp"
#include "report/console_table.hpp"

namespace parbench {
namespace {

RunSummary summary_of(std::size_t points, std::size_t sizes, std::size_t collectives, bool both) {
    RunSummary summary;
    summary.measured_points = points;
    summary.measured_sizes = sizes;
    summary.measured_collectives = collectives;
    summary.both_placements = both;
    summary.checked = true;
    summary.average_busbw_gbps = 1.108761;
    return summary;
}

TEST(ConsoleSummary, SaysWhatTheAverageIsOver) {
    EXPECT_EQ(average_scope(summary_of(21, 21, 1, false)), "the 21 measured sizes");
    EXPECT_EQ(average_scope(summary_of(1, 1, 1, false)), "the 1 measured size");
    // One size in two placements is two points, not "2 sizes and placements".
    EXPECT_EQ(average_scope(summary_of(2, 1, 1, true)), "the 2 measured points (1 size, out of place and in place)");
    EXPECT_EQ(average_scope(summary_of(51, 3, 9, true)),
              "the 51 measured points (9 collectives, 3 sizes, out of place and in place)");
    // -N/--repeat: each sweep measures every point again.
    RunSummary repeated = summary_of(6, 3, 1, false);
    repeated.measured_sweeps = 2;
    EXPECT_EQ(average_scope(repeated), "the 6 measured points (3 sizes, 2 sweeps)");
}

TEST(ConsoleSummary, TalliesWarningsInPlainWords) {
    RunSummary summary = summary_of(1, 1, 1, false);
    EXPECT_FALSE(warning_tally(summary));
    summary.warned_points = 1;
    summary.warning_points = {{"slow-first-sample", 1}, {"wide-spread", 1}};
    EXPECT_EQ(warning_tally(summary), "1 of 1 points warned: slow first sample (1), wide spread (1)");
    summary.measured_points = 51;
    summary.warned_points = 30;
    summary.warning_points = {{"outliers", 26}, {"wide-spread", 21}};
    EXPECT_EQ(warning_tally(summary), "30 of 51 points warned: outliers (26), wide spread (21)");
}

TEST(ConsoleSummary, EndsWithNcclTestsLines) {
    std::ostringstream out;
    print_console_summary(out, summary_of(2, 1, 1, true));
    EXPECT_NE(out.str().find("\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.10876\n"), std::string::npos)
        << out.str();
    std::ostringstream gated;
    print_console_summary(gated, summary_of(2, 1, 1, true), 5.0);
    EXPECT_NE(gated.str().find("# Avg bus bandwidth    : 1.10876 FAILED\n"), std::string::npos) << gated.str();
    RunSummary unchecked = summary_of(2, 1, 1, true);
    unchecked.checked = false;
    std::ostringstream text;
    print_console_summary(text, unchecked, 1.0);
    EXPECT_NE(text.str().find("# Out of bounds values : N/A (-c 0 / --no-check)\n# Avg bus bandwidth    : 1.10876 OK\n"),
              std::string::npos)
        << text.str();
}

TEST(ConsoleSummary, GateFailsBelowTheThresholdOnly) {
    const RunSummary summary = summary_of(2, 1, 1, true);
    EXPECT_FALSE(busbw_gate_failure(summary, std::nullopt));
    EXPECT_FALSE(busbw_gate_failure(summary, BusbwGate{1.0, "--min-busbw"}));
    EXPECT_EQ(busbw_gate_failure(summary, BusbwGate{5.0, "NCCL_TESTS_MIN_BW"}),
              "average busbw 1.11 GB/s is below 5.00 GB/s (NCCL_TESTS_MIN_BW); the run fails its bandwidth gate");
    RunSummary nothing;
    EXPECT_NE(busbw_gate_failure(nothing, BusbwGate{5.0, "--min-busbw"})->find("no point was measured"),
              std::string::npos);
}

}  // namespace
}  // namespace parbench

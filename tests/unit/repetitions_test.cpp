// --repeat's report section (report/repetitions.hpp): each point's times over the sweeps and
// their spread, the whole sweeps counted, and the console's line.
#include <gtest/gtest.h>

#include <vector>

#include "report/repetitions.hpp"

namespace parbench {
namespace {

CollectiveResult point(std::uint64_t bytes, bool inplace, double time_us, int sweep) {
    CollectiveResult r;
    r.collective = "allreduce";
    r.bytes = bytes;
    r.op = ReduceOp::sum;
    r.inplace = inplace;
    r.reported_time_us = time_us;
    r.busbw_gbps = static_cast<double>(bytes) / time_us / 1e3;
    r.repetition = sweep;
    return r;
}

TEST(Repetitions, EachPointsTimesAndSpreadOverTheSweeps) {
    // Three points a sweep: 1 B is skipped (smaller than an element), 1 KiB and 2 KiB measured.
    std::vector<CollectiveResult> results;
    const double times[3][2] = {{10.0, 20.0}, {12.0, 21.0}, {11.0, 40.0}};
    for (int sweep = 0; sweep < 3; ++sweep) {
        CollectiveResult skipped = point(1, false, 1.0, sweep + 1);
        skipped.skipped = "smaller than one float32 per rank";
        results.push_back(skipped);
        for (int p = 0; p < 2; ++p) results.push_back(point(1024u << p, false, times[sweep][p], sweep + 1));
    }
    results.push_back(point(1, false, 1.0, 4));
    results.back().skipped = "smaller than one float32 per rank";
    results.push_back(point(1024, false, 30.0, 4));  // a fourth sweep under way

    const auto spreads = repetition_spreads(results);
    ASSERT_EQ(spreads.size(), 2u);
    EXPECT_EQ(spreads[0].time_us, (std::vector<double>{10.0, 12.0, 11.0, 30.0}));
    EXPECT_NEAR(spreads[0].spread, (30.0 - 10.0) / 11.5, 1e-12);
    EXPECT_NEAR(spreads[1].spread, (40.0 - 20.0) / 21.0, 1e-12);

    const nlohmann::json section = repetitions_json(results, 0, 3);
    EXPECT_EQ(section["requested"], 0);
    EXPECT_EQ(section["completed"], 3);
    EXPECT_EQ(section["points"][1]["bytes"], 2048);
    EXPECT_EQ(section["points"][1]["time_us"].size(), 3u);

    const auto line = spread_line(spreads, 3);
    ASSERT_TRUE(line);
    EXPECT_NE(line->find("over 3 sweeps"), std::string::npos) << *line;
    EXPECT_NE(line->find("largest 173.9 % (allreduce 1024 B out-of-place)"), std::string::npos) << *line;
}

TEST(Repetitions, OneSweepHasNoSpread) {
    const std::vector<CollectiveResult> once{point(1024, false, 10.0, 1), point(1024, true, 11.0, 1)};
    EXPECT_TRUE(repetition_spreads(once).empty());
    EXPECT_FALSE(spread_line(repetition_spreads(once), 1));
}

}  // namespace
}  // namespace parbench

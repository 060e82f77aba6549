// report/csv_report: alltoallv's skew, the imbalance it produced and its direction are columns of the CSV, empty
// for the other collectives, and every row keeps the header's column count.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "report/csv_report.hpp"

namespace parbench {
namespace {

std::vector<std::string> cells(const std::string& line) {
    std::vector<std::string> out;
    std::stringstream stream(line);
    std::string cell;
    while (std::getline(stream, cell, ',')) out.push_back(cell);
    if (!line.empty() && line.back() == ',') out.emplace_back();
    return out;
}

TEST(CsvReport, SkewAndImbalanceColumns) {
    CollectiveResult skewed;
    skewed.collective = "alltoallv";
    skewed.bytes = 4096;
    skewed.skew = SkewUsed{"zipf:1.2", 7, "combine"};
    skewed.imbalance = TrafficImbalance{};
    skewed.imbalance->received = {300, 200.0, 1};
    skewed.imbalance->sent = {250, 200.0, 0};
    CollectiveResult plain;
    plain.collective = "allreduce";
    plain.bytes = 4096;
    CollectiveResult skipped = skewed;
    skipped.imbalance.reset();
    skipped.skipped = "not run";

    std::stringstream csv(to_csv({skewed, plain, skipped}));
    std::string line;
    std::getline(csv, line);
    const std::vector<std::string> header = cells(line);
    const auto column = [&](const std::string& name) {
        for (std::size_t i = 0; i < header.size(); ++i)
            if (header[i] == name) return i;
        ADD_FAILURE() << "no column " << name << " in " << line;
        return std::size_t{0};
    };
    std::vector<std::vector<std::string>> rows;
    while (std::getline(csv, line)) rows.push_back(cells(line));
    ASSERT_EQ(rows.size(), 3u);
    for (const auto& row : rows) EXPECT_EQ(row.size(), header.size());
    EXPECT_EQ(rows[0][column("skew")], "zipf:1.2");
    EXPECT_EQ(rows[0][column("skew_seed")], "7");
    EXPECT_EQ(rows[0][column("imbalance_received")], "1.5");
    EXPECT_EQ(rows[0][column("imbalance_sent")], "1.25");
    EXPECT_EQ(rows[0][column("direction")], "combine");
    for (const char* name : {"skew", "skew_seed", "imbalance_received", "imbalance_sent", "direction"})
        EXPECT_EQ(rows[1][column(name)], "") << name;
    EXPECT_EQ(rows[2][column("skew")], "zipf:1.2");  // a skipped point still says what it was
    EXPECT_EQ(rows[2][column("imbalance_received")], "");
    EXPECT_EQ(rows[2][column("direction")], "combine");
}

}  // namespace
}  // namespace parbench

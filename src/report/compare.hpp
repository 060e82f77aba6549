// Lines up the points that several collective reports share (same collective, size,
// type, op, placement), with each report's bus bandwidth and median time and the ratio
// to the first report. Reads files only: no MPI.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace parbench {

struct LabelledReport {
    std::string label;  // shown as the column heading, e.g. the file name
    nlohmann::json document;
};

struct ComparedPoint {
    std::string collective;
    std::uint64_t bytes = 0;
    std::string dtype;
    std::string op;  // "" for data movement
    bool inplace = false;
    std::vector<double> busbw_gbps;    // one per report, in report order
    std::vector<double> median_us;
};

struct Comparison {
    std::vector<std::string> labels;
    std::vector<ComparedPoint> points;  // in the first report's order
    std::size_t unshared = 0;           // points of the first report missing elsewhere
};

// Throws UsageError naming the report when it is not a parbench collective report.
void check_collective_report(const LabelledReport& report);
Comparison compare_reports(const std::vector<LabelledReport>& reports);

enum class CompareFormat { console, markdown, csv };
std::string render(const Comparison& comparison, CompareFormat format);

}  // namespace parbench

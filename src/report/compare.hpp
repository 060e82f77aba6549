// Lines up the points that several collective reports share (same collective, size,
// type, op, placement), with each report's bus bandwidth and median time and the ratio
// to the first report. Reads files only: no MPI. Usable as a CI gate: every malformed input
// is a UsageError naming the file, and below_threshold lists the points that regressed.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace parbench {

struct LabelledReport {
    std::string label;  // shown as the column heading: the shortest distinct path suffix
    nlohmann::json document;
};

// What a column stands for: printed in its heading, compared across reports.
struct ReportSetup {
    int world_size = 0;
    std::string backend;
    std::string hosts;  // first host, "+N" when more
    std::string dtype;
    std::string describe() const;  // "2 ranks, mpi, vm"
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
    std::vector<ReportSetup> setups;
    std::vector<ComparedPoint> points;  // in the first report's order
    std::size_t unshared = 0;           // points of the first report missing elsewhere
    std::vector<std::string> warnings;  // setups that differ: ratios compare unlike things
};

// Each path's shortest suffix of whole components that no other path ends with
// ("a/run.json", "b/run.json" -> "a/run.json", "b/run.json"; "x/a.json", "y/b.json" ->
// "a.json", "b.json"); a path given twice gets " (2)".
std::vector<std::string> distinct_labels(const std::vector<std::string>& paths);

// Throws UsageError naming the report and what is wrong when it is not a parbench collective
// report, lacks a field a measured point needs, or holds no measured point.
void check_collective_report(const LabelledReport& report);
// Throws UsageError, saying what each report holds, when the reports share no point.
Comparison compare_reports(const std::vector<LabelledReport>& reports);

enum class CompareFormat { console, markdown, csv };
std::string render(const Comparison& comparison, CompareFormat format);

// One line per (point, report) whose busbw ratio to the first report is below `threshold`.
std::vector<std::string> below_threshold(const Comparison& comparison, double threshold);

}  // namespace parbench

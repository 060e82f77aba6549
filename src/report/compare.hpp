// Lines up the points that several collective reports share (same collective, size,
// type, op, placement, and alltoallv's skew), with each report's bus bandwidth and median time and the ratio
// to the first report. Reads files only: no MPI. Usable as a CI gate: every malformed input
// is a UsageError naming the file, reports that failed (or, unless allowed, are partial) are
// refused, each point says whether its difference is beyond run-to-run noise (a bootstrap
// over the per-iteration samples every report keeps), and judge_threshold lists the points
// that regressed: below the threshold and beyond the noise.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "report/text_table.hpp"

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
    std::string pages;  // environment.buffer_pages.obtained: normal, huge, ...; "" in reports from before it
    std::string describe() const;  // "2 ranks, mpi, vm, normal pages"
};

// Report r against the first at one point: a percentile bootstrap confidence interval of the
// busbw ratio, from each report's per-iteration samples resampled with replacement.
struct NoiseVerdict {
    bool judged = false;  // both reports kept 2 or more samples of the point
    double low = 0.0;     // the interval of the busbw ratio
    double high = 0.0;
    bool beyond() const { return judged && (high < 1.0 || low > 1.0); }  // the interval excludes 1
};

struct ComparedPoint {
    std::string collective;
    std::uint64_t bytes = 0;
    std::string dtype;
    std::string op;  // "" for data movement
    bool inplace = false;
    std::string skew;  // alltoallv: "zipf:1.2 seed 1", part of the point's identity; "" otherwise
    std::vector<double> busbw_gbps;    // one per report, in report order
    std::vector<double> median_us;
    std::vector<NoiseVerdict> noise;  // one per report; the first's is unused
};

struct Comparison {
    std::vector<std::string> labels;
    std::vector<ReportSetup> setups;
    std::vector<ComparedPoint> points;  // in the first report's order
    std::size_t unshared = 0;           // points of the first report missing elsewhere
    std::vector<std::string> warnings;  // setups that differ, partial reports allowed
    double confidence = 0.95;           // of the noise intervals
};

// Each path's shortest suffix of whole components that no other path ends with
// ("a/run.json", "b/run.json" -> "a/run.json", "b/run.json"; "x/a.json", "y/b.json" ->
// "a.json", "b.json"); a path given twice gets " (2)".
std::vector<std::string> distinct_labels(const std::vector<std::string>& paths);

struct CompareOptions {
    double confidence = 0.95;    // of the noise intervals, in (0.5, 1)
    bool allow_partial = false;  // compare reports of runs that ended early ("status": "partial")
    int resamples = 2000;        // bootstrap resamples per point and report
};

// Throws UsageError naming the report and what is wrong when it is not a parbench collective
// report, lacks a field a measured point needs, or holds no measured point.
void check_collective_report(const LabelledReport& report);
// Throws UsageError naming the report and its status_reason when it failed (wrong data), or is
// partial and `allow_partial` is false; also when its status is not one a report has.
void check_report_status(const LabelledReport& report, bool allow_partial);
// Throws UsageError, saying what each report holds, when the reports share no point.
Comparison compare_reports(const std::vector<LabelledReport>& reports, const CompareOptions& options = {});

namespace detail {
// The percentile bootstrap interval at `confidence` of `observed` x (stat(A*) / stat(A)) /
// (stat(B*) / stat(B)): the busbw ratio of B to A, whose times are the samples; stat is the
// median, or the mean when `means`. Deterministic: `seed` drives the resampling.
NoiseVerdict bootstrap_ratio(const std::vector<double>& a, const std::vector<double>& b, double observed,
                             bool means, double confidence, int resamples, std::uint64_t seed);
}  // namespace detail

using CompareFormat = TableFormat;  // console, markdown, csv
std::string render(const Comparison& comparison, CompareFormat format);

struct ThresholdVerdict {
    std::vector<std::string> regressions;   // below the threshold and beyond the noise (or no samples to tell)
    std::vector<std::string> within_noise;  // below the threshold, but not beyond the noise: passed
};
// One line per (point, report) whose busbw ratio to the first report is below `threshold`.
ThresholdVerdict judge_threshold(const Comparison& comparison, double threshold, double confidence);

}  // namespace parbench

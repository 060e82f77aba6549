// Lines up the points that several collective reports share (same collective, size,
// type, op, placement, and alltoallv's skew), with each report's bus bandwidth and median time and the ratio
// to the first report. Reads files only: no MPI. Usable as a CI gate: every malformed input
// is a UsageError naming the file, reports that failed (or, unless allowed, are partial) are
// refused, each point says whether its difference is beyond run-to-run noise, and
// judge_threshold lists the points that regressed: below the threshold beyond that noise.
// Run-to-run noise comes from the runs of a point (report/point_runs.hpp): the sweeps of a
// report made with --repeat, or several reports given as one column; a point measured once a
// side has only its iterations' spread (a bootstrap over the samples every report keeps), which
// says nothing of how runs differ: it is shown as within-run only and never fails the gate.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
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
    std::uint64_t off_cache_bytes = 0;  // config.off_cache_bytes (--off-cache); 0: hot buffers
    bool nonblocking = false;           // config.nonblocking (--nonblocking): MPI_I* and its wait
    std::string describe() const;  // "2 ranks, mpi, vm, normal pages"
};

// Where a noise interval comes from: the point's iterations in one run each (a percentile
// bootstrap over the samples, which shows none of the spread between runs), or its runs
// (report/point_runs.hpp).
enum class NoiseSource { within_run, between_runs };

// Report r against the first at one point: a confidence interval of the busbw ratio.
struct NoiseVerdict {
    bool judged = false;  // enough to tell: 2 or more samples a side, or 2 or more runs on one side
    double low = 0.0;     // the interval of the busbw ratio
    double high = 0.0;
    NoiseSource source = NoiseSource::within_run;
    std::pair<std::size_t, std::size_t> runs{1, 1};  // runs of the point in the first report and in this one
    std::size_t interrupted = 0;                     // runs left out as interrupted (report/point_runs.hpp)
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
    double confidence = 0.95;           // of the noise intervals: between runs, all of them together
    std::size_t between_runs = 0;       // intervals from runs, which share the confidence (Bonferroni)
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
    std::vector<std::string> regressions;   // below the threshold beyond run-to-run noise
    std::vector<std::string> within_noise;  // below the threshold, but within run-to-run noise: passed
    std::vector<std::string> unjudged;      // below the threshold, with no runs to tell: passed, said so
};
// One line per (point, report) whose busbw ratio to the first report is below `threshold`: a
// regression when its between-runs interval lies wholly below the threshold.
ThresholdVerdict judge_threshold(const Comparison& comparison, double threshold, double confidence);

}  // namespace parbench

// `parbench compare A.json B.json ...`: no MPI, only files. A CI gate: a bad report is exit
// 2 naming the file, as is a failed run's report or (without --allow-partial) a partial one;
// reports that share nothing are exit 2 saying what each holds; and --threshold R is exit 3
// when a shared point's busbw fell below R times the first report's beyond run-to-run noise
// (its interval from the point's runs lies below R; report/point_runs.hpp). A column may be
// several reports of one run configuration, "a.json,b.json": their runs of each point are the
// column's runs.
// NCCL Inspector logs (files, or the folder the plugin wrote them in) given with reports are set
// against them instead: the in-job busbw of each (collective, size bucket, group size) beside the
// benchmark's (report/inspector_compare.hpp); --threshold R then gates those ratios.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/command.hpp"
#include "core/console.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "report/compare.hpp"
#include "report/inspector_compare.hpp"
#include "report/point_runs.hpp"

namespace parbench {
namespace {

constexpr int regression_exit_code = 3;

// "compare: 12 points compared (2 of a.json's missing elsewhere); b.json: 3 beyond run-to-run
// noise at 95 %, 9 within"
std::string count_line(const Comparison& comparison) {
    std::ostringstream line;
    line << "compare: " << comparison.points.size() << (comparison.points.size() == 1 ? " point" : " points")
         << " compared";
    if (comparison.unshared > 0)
        line << " (" << comparison.unshared << " of " << comparison.labels.front() << "'s missing elsewhere)";
    for (std::size_t r = 1; r < comparison.labels.size(); ++r) {
        std::size_t beyond = 0, within = 0, within_run = 0, unjudged = 0;
        for (const ComparedPoint& point : comparison.points) {
            const NoiseVerdict& noise = point.noise[r];
            if (!noise.judged)
                ++unjudged;
            else if (noise.source == NoiseSource::within_run)
                ++within_run;
            else
                ++(noise.beyond() ? beyond : within);
        }
        line << "; " << comparison.labels[r] << ": " << beyond << " beyond run-to-run noise at "
             << comparison.confidence * 100.0 << " % (all together), " << within << " within";
        if (within_run > 0)
            line << ", " << within_run << " with one run a side (within-run spread only: not judged against "
                 << "run-to-run noise; --repeat 3 measures it)";
        if (unjudged > 0) line << ", " << unjudged << " without samples";
    }
    return line.str();
}

// The reports of one column: "a.json,b.json" is two runs of one configuration; a path that
// exists as it is, comma or not, is one report.
std::vector<std::string> column_paths(const std::string& column) {
    std::error_code error;
    if (std::filesystem::exists(column, error) || column.find(',') == std::string::npos) return {column};
    std::vector<std::string> paths;
    std::size_t begin = 0;
    for (;;) {
        const std::size_t comma = column.find(',', begin);
        const std::string path = column.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
        if (path.empty())
            throw UsageError("'" + column + "': an empty report name between commas; give a.json,b.json for two runs "
                             "of one configuration");
        paths.push_back(path);
        if (comma == std::string::npos) return paths;
        begin = comma + 1;
    }
}

// A threshold as given: 0.9, not 0.900000.
std::string number_text(double value) {
    std::ostringstream text;
    text << value;
    return text.str();
}

std::string read_text(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) throw UsageError("cannot read '" + path + "'; give report files written with --json or NCCL Inspector logs");
    std::ostringstream text;
    text << file.rdbuf();
    return text.str();
}

// The Inspector logs of a folder (NCCL_INSPECTOR_DUMP_DIR: *.log or *.jsonl files, in sub-folders
// too), in path order; none when it holds none.
std::vector<std::string> inspector_logs_in(const std::string& folder) {
    std::vector<std::string> logs;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(folder)) {
        const std::string extension = entry.path().extension().string();
        if (entry.is_regular_file() && (extension == ".log" || extension == ".jsonl") &&
            looks_like_inspector_log(read_text(entry.path().string())))
            logs.push_back(entry.path().string());
    }
    std::sort(logs.begin(), logs.end());
    return logs;
}

// The arguments split into NCCL Inspector logs (a folder of them, or a file whose first line is
// a record) and the rest, the reports.
struct InJobInputs {
    std::vector<std::string> logs;
    std::vector<std::string> reports;
};

InJobInputs split_in_job_inputs(const std::vector<std::string>& paths) {
    InJobInputs inputs;
    for (const std::string& path : paths) {
        std::error_code error;
        if (std::filesystem::is_directory(path, error)) {
            const std::vector<std::string> logs = inspector_logs_in(path);
            if (logs.empty()) inputs.reports.push_back(path);  // refused below, as a folder always was
            inputs.logs.insert(inputs.logs.end(), logs.begin(), logs.end());
        } else if (std::filesystem::is_regular_file(path, error) && looks_like_inspector_log(read_text(path))) {
            inputs.logs.push_back(path);
        } else {
            inputs.reports.push_back(path);
        }
    }
    return inputs;
}

class CompareCommand : public Command {
  public:
    std::vector<std::string> paths;
    bool markdown = false;
    bool csv = false;
    std::optional<double> threshold;
    double confidence = 0.95;
    bool allow_partial = false;

    void validate() const override {
        if (paths.size() < 2)
            throw UsageError("compare needs at least two files: parbench compare A.json B.json, or NCCL Inspector logs "
                             "and a report (parbench compare inspector-dir/ bench.json)");
        if (markdown && csv) throw UsageError("--markdown and --csv exclude each other; pick one");
        if (threshold && !(std::isfinite(*threshold) && *threshold > 0))
            throw UsageError("--threshold is a busbw ratio to the first report, a positive number (e.g. 0.9)");
        if (!(std::isfinite(confidence) && confidence >= 0.5 && confidence < 1.0))
            throw UsageError("--confidence is the level of the noise intervals, from 0.5 up to (not including) 1, e.g. "
                             "0.95");
    }

    bool needs_mpi() const override { return false; }

    int run(Invocation&) override {
        if (const InJobInputs in_job = split_in_job_inputs(paths); !in_job.logs.empty()) return run_in_job(in_job);
        // A column of several reports ("a.json,b.json") is labelled by its first, "+N" more.
        std::vector<std::vector<std::string>> columns;
        std::vector<std::string> firsts;
        for (const std::string& column : paths) {
            columns.push_back(column_paths(column));
            firsts.push_back(columns.back().front());
        }
        const std::vector<std::string> labels = distinct_labels(firsts);
        std::vector<LabelledReport> reports;
        for (std::size_t i = 0; i < columns.size(); ++i) {
            std::vector<LabelledReport> runs;
            for (const std::string& path : columns[i]) {
                std::error_code error;
                if (std::filesystem::is_directory(path, error))
                    throw UsageError("'" + path + "' is a folder; give report files (e.g. " + path + "/*.json)");
                runs.push_back({columns[i].size() == 1 ? labels[i] : path, read_json_file(path)});
            }
            if (runs.size() == 1)
                reports.push_back(std::move(runs.front()));
            else
                reports.push_back(merge_runs(labels[i] + " +" + std::to_string(runs.size() - 1), runs, allow_partial));
        }
        const Comparison comparison = compare_reports(reports, {confidence, allow_partial});
        for (const std::string& warning : comparison.warnings) write_line(std::cerr, "warning: " + warning);
        const CompareFormat format =
            markdown ? CompareFormat::markdown : (csv ? CompareFormat::csv : CompareFormat::console);
        std::cout << render(comparison, format) << std::flush;
        write_line(std::cerr, count_line(comparison));
        if (!threshold) return 0;
        const ThresholdVerdict verdict = judge_threshold(comparison, *threshold, confidence);
        for (const std::string& line : verdict.within_noise) write_line(std::cerr, "passed: " + line);
        for (const std::string& line : verdict.unjudged) write_line(std::cerr, "not judged: " + line);
        for (const std::string& line : verdict.regressions) write_line(std::cerr, "regression: " + line);
        if (!verdict.unjudged.empty())
            write_line(std::cerr, "warning: " + std::to_string(verdict.unjudged.size()) + " point(s) below --threshold " +
                                      number_text(*threshold) +
                                      " could not be judged: with one run a side a report shows its iterations' spread, "
                                      "not how runs differ, so the gate passes them; measure with --repeat 3, or give "
                                      "several reports a side (a.json,b.json)");
        if (verdict.regressions.empty()) return 0;
        std::ostringstream error;
        error << "error: " << verdict.regressions.size() << " point(s) below --threshold " << *threshold
              << " of the first report's busbw, beyond run-to-run noise (listed above)";
        write_line(std::cerr, error.str());
        return regression_exit_code;
    }

  private:
    // Inspector logs against the reports: the in-job table, and exit 3 when --threshold is given
    // and a group's ratio lies below it.
    int run_in_job(const InJobInputs& inputs) const {
        if (inputs.reports.empty())
            throw UsageError("NCCL Inspector logs need a parbench report to be set against: add one written by "
                             "parbench <collective>|all --json on the job's group size");
        std::vector<InspectorRecord> records;
        for (const std::string& log : inputs.logs)
            for (InspectorRecord& record : parse_inspector_log(read_text(log), log)) records.push_back(std::move(record));
        const std::vector<std::string> labels = distinct_labels(inputs.reports);
        std::vector<LabelledReport> reports;
        for (std::size_t i = 0; i < inputs.reports.size(); ++i) {
            std::error_code error;
            if (std::filesystem::is_directory(inputs.reports[i], error))
                throw UsageError("'" + inputs.reports[i] + "' is a folder without NCCL Inspector logs (*.log, *.jsonl); "
                                 "give report files or the folder NCCL_INSPECTOR_DUMP_DIR named");
            reports.push_back({labels[i], read_json_file(inputs.reports[i])});
            check_report_status(reports.back(), allow_partial);
        }
        const CompareFormat format =
            markdown ? CompareFormat::markdown : (csv ? CompareFormat::csv : CompareFormat::console);
        const InJobComparison comparison = compare_in_job(records, reports);
        std::cout << render(comparison, format) << std::flush;
        std::size_t low = 0, unmatched = 0, below = 0;
        for (const InJobRow& row : comparison.rows) {
            low += row.verdict == "LOW" ? 1 : 0;
            unmatched += row.ratio ? 0 : 1;
            if (!threshold || !row.ratio || *row.ratio >= *threshold) continue;
            ++below;
            std::ostringstream line;
            line << "error: in-job " << row.collective << " " << row.bucket_bytes << " B bucket on " << row.n_ranks
                 << " ranks: busbw " << row.job_busbw_gbps << " GB/s is " << *row.ratio << "x of the benchmark's "
                 << *row.bench_busbw_gbps << " GB/s (" << row.bench_report << "), below --threshold " << *threshold;
            write_line(std::cerr, line.str());
        }
        std::ostringstream count;
        count << "compare: " << comparison.rows.size() << " in-job groups from " << comparison.records
              << " Inspector records in " << inputs.logs.size() << " log(s); " << low << " LOW, " << unmatched
              << " without a benchmark point";
        if (comparison.untimed_records > 0) count << "; " << comparison.untimed_records << " records without a time left out";
        write_line(std::cerr, count.str());
        return below > 0 ? regression_exit_code : 0;
    }
};

}  // namespace

std::unique_ptr<Command> add_compare_command(CLI::App& app) {
    auto command = std::make_unique<CompareCommand>();
    CLI::App* sub = app.add_subcommand("compare", "Line up the points that several reports share (no MPI needed)");
    sub->add_option("reports", command->paths,
                    "Report files written with --json; a,b,c: several runs of one configuration as one column, their "
                    "spread the run-to-run noise; NCCL Inspector logs (or their folder) beside a report set "
                    "in-job figures against it")
        ->required();
    sub->add_flag("--markdown", command->markdown, "Print a Markdown table");
    sub->add_flag("--csv", command->csv, "Print CSV");
    sub->add_option("--threshold", command->threshold,
                    "Exit 3 when a shared point's busbw is below R x the first report's beyond run-to-run noise "
                    "(its interval from the point's runs lies below R: --repeat sweeps or a,b reports; a CI gate, "
                    "e.g. 0.9)");
    sub->add_option("--confidence", command->confidence,
                    "Level of the noise intervals: those from runs hold at it all together (Bonferroni), a "
                    "within-run one (one run a side) on its own")
        ->capture_default_str();
    sub->add_flag("--allow-partial", command->allow_partial,
                  "Compare reports of runs that ended early (status partial); failed runs are always refused");
    return command;
}

}  // namespace parbench

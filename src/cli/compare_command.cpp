// `parbench compare A.json B.json ...`: no MPI, only files. A CI gate: a bad report is exit
// 2 naming the file, reports that share nothing are exit 2 saying what each holds, and
// --threshold R is exit 3 when a shared point's busbw fell below R times the first report's.
#include <cmath>
#include <filesystem>
#include <iostream>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "report/compare.hpp"

namespace parbench {
namespace {

constexpr int regression_exit_code = 3;

class CompareCommand : public Command {
  public:
    std::vector<std::string> paths;
    bool markdown = false;
    bool csv = false;
    std::optional<double> threshold;

    void validate() const override {
        if (paths.size() < 2) throw UsageError("compare needs at least two reports: parbench compare A.json B.json");
        if (markdown && csv) throw UsageError("--markdown and --csv exclude each other; pick one");
        if (threshold && !(std::isfinite(*threshold) && *threshold > 0))
            throw UsageError("--threshold is a busbw ratio to the first report, a positive number (e.g. 0.9)");
    }

    int run(Invocation&) override {
        const std::vector<std::string> labels = distinct_labels(paths);
        std::vector<LabelledReport> reports;
        for (std::size_t i = 0; i < paths.size(); ++i) {
            std::error_code error;
            if (std::filesystem::is_directory(paths[i], error))
                throw UsageError("'" + paths[i] + "' is a folder; give report files (e.g. " + paths[i] + "/*.json)");
            reports.push_back({labels[i], read_json_file(paths[i])});
        }
        const Comparison comparison = compare_reports(reports);
        for (const std::string& warning : comparison.warnings) std::cerr << "warning: " << warning << '\n';
        const CompareFormat format =
            markdown ? CompareFormat::markdown : (csv ? CompareFormat::csv : CompareFormat::console);
        std::cout << render(comparison, format) << std::flush;
        if (!threshold) return 0;
        const std::vector<std::string> regressions = below_threshold(comparison, *threshold);
        for (const std::string& line : regressions) std::cerr << "regression: " << line << '\n';
        if (regressions.empty()) return 0;
        std::cerr << "error: " << regressions.size() << " point(s) below --threshold " << *threshold
                  << " of the first report's busbw (listed above)\n";
        return regression_exit_code;
    }
};

}  // namespace

std::unique_ptr<Command> add_compare_command(CLI::App& app) {
    auto command = std::make_unique<CompareCommand>();
    CLI::App* sub = app.add_subcommand("compare", "Line up the points that several reports share (no MPI needed)");
    sub->add_option("reports", command->paths, "Report files written with --json")->required();
    sub->add_flag("--markdown", command->markdown, "Print a Markdown table");
    sub->add_flag("--csv", command->csv, "Print CSV");
    sub->add_option("--threshold", command->threshold,
                    "Exit 3 when a shared point's busbw is below R x the first report's (a CI gate, e.g. 0.9)");
    return command;
}

}  // namespace parbench

// `parbench compare A.json B.json ...`: no MPI, only files.
#include <filesystem>
#include <iostream>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "report/compare.hpp"
#include "report/json_file.hpp"

namespace parbench {
namespace {

class CompareCommand : public Command {
  public:
    std::vector<std::string> paths;
    bool markdown = false;
    bool csv = false;

    void validate() const override {
        if (paths.size() < 2) throw UsageError("compare needs at least two reports: parbench compare A.json B.json");
        if (markdown && csv) throw UsageError("--markdown and --csv exclude each other; pick one");
    }

    int run(Invocation&) override {
        std::vector<LabelledReport> reports;
        for (const std::string& path : paths)
            reports.push_back({std::filesystem::path(path).filename().string(), read_json_file(path)});
        const Comparison comparison = compare_reports(reports);
        const CompareFormat format =
            markdown ? CompareFormat::markdown : (csv ? CompareFormat::csv : CompareFormat::console);
        std::cout << render(comparison, format);
        return 0;
    }
};

}  // namespace

std::unique_ptr<Command> add_compare_command(CLI::App& app) {
    auto command = std::make_unique<CompareCommand>();
    CLI::App* sub = app.add_subcommand("compare", "Line up the points that several reports share (no MPI needed)");
    sub->add_option("reports", command->paths, "Report files written with --json")->required();
    sub->add_flag("--markdown", command->markdown, "Print a Markdown table");
    sub->add_flag("--csv", command->csv, "Print CSV");
    return command;
}

}  // namespace parbench

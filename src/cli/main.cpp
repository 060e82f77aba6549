// parbench: one binary, one subcommand per collective plus all, compare, info, train.
// Every error ends here: usage errors exit 2, failures 1, each with one line on stderr
// from the first rank only.
#include <CLI/CLI.hpp>

#include <iostream>
#include <utility>
#include <vector>

#include "cli/command.hpp"
#include "cli/launcher.hpp"
#include "collectives/collective.hpp"
#include "core/error.hpp"
#include "report/report_document.hpp"

namespace {

int run(int& argc, char**& argv) {
    using namespace parbench;
    CLI::App app{"parbench: benchmark collectives and parallel training steps"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string(PARBENCH_VERSION) + " (" + PARBENCH_GIT + ")");

    std::vector<std::pair<CLI::App*, std::unique_ptr<Command>>> commands;
    auto add = [&](std::unique_ptr<Command> command) { commands.emplace_back(app.get_subcommands({}).back(), std::move(command)); };
    for (const Collective* collective : all_collectives()) add(add_collective_command(app, std::string(collective->name())));
    add(add_collective_command(app, "all"));
    add(add_compare_command(app));
    add(add_info_command(app));
    add(add_train_command(app));

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& error) {
        if (!is_first_rank()) return error.get_exit_code() == 0 ? 0 : 2;
        const int code = app.exit(error);
        return code == 0 ? 0 : 2;
    }

    for (auto& [subcommand, command] : commands) {
        if (!subcommand->parsed()) continue;
        Invocation invocation{argc, argv, std::vector<std::string>(argv, argv + argc), utc_now_iso8601()};
        command->validate();
        return command->run(invocation);
    }
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const parbench::UsageError& error) {
        if (parbench::is_first_rank()) std::cerr << "error: " << error.what() << '\n';
        return 2;
    } catch (const parbench::ValidationFailure& error) {
        std::cerr << "error: " << error.what() << '\n';
        return 1;
    } catch (const std::exception& error) {
        std::cerr << "error: " << error.what() << '\n';
        return 1;
    }
}

// parbench: one binary, one subcommand per collective plus all, compare, info, train.
// Every error ends here: usage errors exit 2, failures 1, each with one line on stderr,
// printed once: by the first rank when every rank saw it, else by the lowest rank that did.
#include <CLI/CLI.hpp>

#include <iostream>
#include <utility>
#include <vector>

#include "cli/command.hpp"
#include "cli/launcher.hpp"
#include "cli/mpi_scope.hpp"
#include "collectives/collective.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "report/report_document.hpp"

namespace {

int run(int& argc, char**& argv) {
    using namespace parbench;
    CLI::App app{"parbench: benchmark collectives and parallel training steps"};
    app.require_subcommand(0, 1);
    bool version = false;
    app.add_flag("--version", version, "Print the version and exit");
    bool dry_run = false;
    // For the docs tests; accepted, not listed in --help (CLI11 hides the empty group).
    app.add_flag("--dry-run", dry_run, "Parse and validate the command's flags, then exit without running it")
        ->group("");

    std::vector<std::pair<CLI::App*, std::unique_ptr<Command>>> commands;
    auto add = [&](std::unique_ptr<Command> command) { commands.emplace_back(app.get_subcommands({}).back(), std::move(command)); };
    for (const Collective* collective : all_collectives()) add(add_collective_command(app, std::string(collective->name())));
    add(add_collective_command(app, "all"));
    add(add_compare_command(app));
    add(add_info_command(app));
    add(add_pairs_command(app));
    add(add_train_command(app));
    add(add_plan_command(app));
    add(add_moe_dispatch_command(app));

    const auto known = [&](const std::string& name) {
        const auto subcommands = app.get_subcommands([&](CLI::App* sub) { return sub->get_name() == name; });
        return !subcommands.empty();
    };
    if (argc > 1 && argv[1][0] != '-' && !known(argv[1]))
        throw UsageError("unknown command '" + std::string(argv[1]) + "'; run 'parbench --help' for the list");
    try {
        app.parse(argc, argv);
    } catch (const CLI::Success& done) {  // --help
        return run_beside_peers(argc, argv, [&] { return app.exit(done); });
    } catch (const CLI::ParseError& error) {
        throw UsageError(std::string(error.what()) + "; run 'parbench " +
                         (argc > 1 && argv[1][0] != '-' ? std::string(argv[1]) + " " : std::string()) +
                         "--help' for the options");
    }

    if (version) {
        return run_beside_peers(argc, argv, [] {
            std::cout << "parbench " << tool_version << " (" << git_revision() << ")\n";
            return 0;
        });
    }
    for (auto& [subcommand, command] : commands) {
        if (!subcommand->parsed()) continue;
        Invocation invocation{argc, argv, std::vector<std::string>(argv, argv + argc), utc_now_iso8601(), subcommand};
        command->validate();
        if (dry_run) {  // what the docs tests check for lines that need GPUs, hosts or Nsight
            return run_beside_peers(argc, argv, [] {
                std::cout << "flags valid\n";
                return 0;
            });
        }
        if (!command->needs_mpi()) return run_beside_peers(argc, argv, [&] { return command->run(invocation); });
        return command->run(invocation);
    }
    throw UsageError("no command given; run 'parbench --help' for the list (e.g. parbench allreduce --size 100M)");
}

}  // namespace

// An error before MPI started, in a launch of several ranks, is told to the others through
// their first agreement (cli/mpi_scope.hpp), where they wait whatever they run; once MPI has
// run (a command that needs none failed on the first rank, after the agreement) or alone, the
// error is this process's own.
bool peers_wait_in_mpi() { return parbench::launcher_world_size() >= 2 && !parbench::mpi_was_started(); }

// One write per line: mpirun forwards output in chunks, and a line split across writes
// can be interleaved with its own messages.
void print_error(const std::string& message) { std::cerr << ("error: " + message + "\n") << std::flush; }

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const parbench::UsageError& error) {
        if (peers_wait_in_mpi()) return parbench::join_failed_start(argc, argv, error.what());
        if (parbench::is_first_rank()) print_error(error.what());
        return 2;
    } catch (const std::exception& error) {  // ValidationFailure and the rest: exit 1
        if (peers_wait_in_mpi()) return parbench::join_failed_start(argc, argv, error.what(), 1);
        print_error(error.what());
        return 1;
    }
}

// A subcommand: its options are fields bound to CLI11 when it is added, validate() checks
// them before MPI starts (so bad input never reaches a collective), run() does the work.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

namespace parbench {

struct Invocation {
    int& argc;
    char**& argv;
    std::vector<std::string> arguments;  // argv as given, for the report
    std::string started_at;              // ISO 8601 UTC
    const CLI::App* command = nullptr;   // the parsed subcommand: its flags, for messages
};

class Command {
  public:
    virtual ~Command() = default;
    // Throws UsageError naming the flag and the fix.
    virtual void validate() const {}
    // Returns the process exit status.
    virtual int run(Invocation& invocation) = 0;
    // Whether run() starts MPI. One that does not (plan, compare) is run, in a launch of several
    // ranks, by the first rank alone once every rank has agreed to run it (cli/mpi_scope.hpp).
    virtual bool needs_mpi() const { return true; }
};

// Each adds its subcommand(s) to the app; the command object holds the parsed options.
std::unique_ptr<Command> add_collective_command(CLI::App& app, const std::string& name);
std::unique_ptr<Command> add_compare_command(CLI::App& app);
std::unique_ptr<Command> add_info_command(CLI::App& app);
std::unique_ptr<Command> add_pairs_command(CLI::App& app);
std::unique_ptr<Command> add_train_command(CLI::App& app);
std::unique_ptr<Command> add_plan_command(CLI::App& app);
std::unique_ptr<Command> add_moe_dispatch_command(CLI::App& app);

}  // namespace parbench

#include "cli/mpi_scope.hpp"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/launcher.hpp"
#include "cli/rank_agreement.hpp"
#include "comm/mpi_communicator.hpp"
#include "bench/watchdog.hpp"
#include "core/error.hpp"

namespace parbench {
namespace {

void print_line(const std::string& line) { std::cerr << (line + "\n") << std::flush; }

std::string where(const MpiSession& session) {
    const int rank = session.world_rank();
    return "rank " + std::to_string(rank) + " (" + session.hosts_by_rank()[static_cast<std::size_t>(rank)] + ")";
}

// Prints `message` and ends the process with `exit_code` unless disarmed within `delay`: the
// way out when the peers a rank waits for never come. Its thread makes no MPI call.
class FallbackExit {
  public:
    FallbackExit(std::string message, std::chrono::duration<double> delay, int exit_code = 2)
        : thread_([this, message = std::move(message), delay, exit_code] {
              std::unique_lock lock(mutex_);
              if (wake_.wait_for(lock, delay, [this] { return disarmed_; })) return;
              print_line(message);
              std::_Exit(exit_code);
          }) {}
    ~FallbackExit() {
        {
            std::lock_guard lock(mutex_);
            disarmed_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }
    FallbackExit(const FallbackExit&) = delete;
    FallbackExit& operator=(const FallbackExit&) = delete;

  private:
    std::mutex mutex_;
    std::condition_variable wake_;
    bool disarmed_ = false;
    std::thread thread_;
};

// The command word of argv ("allreduce"), which every rank must share.
std::string command_of(const std::vector<std::string>& arguments) { return arguments.size() > 1 ? arguments[1] : ""; }

// The start-up agreements run before the watchdog exists; with --timeout they are bounded too,
// for a peer that never joins them (an older build, which makes other MPI calls first).
std::optional<FallbackExit> start_up_guard(const MpiSession& session, const nlohmann::json& options) {
    const double timeout_s = options.is_object() ? options.value("timeout_s", 0.0) : 0.0;
    if (!(timeout_s > 0)) return std::nullopt;
    std::ostringstream seconds;
    seconds << timeout_s;
    return std::optional<FallbackExit>(
        std::in_place,
        "error: watchdog: " + where(session) + " waited " + seconds.str() +
            " s (--timeout) for the other ranks to agree on the build, command and flags: a rank runs another "
            "command or an older parbench build; launch every rank with the same build, command and flags",
        std::chrono::duration<double>(timeout_s), watchdog_exit_code);
}

}  // namespace

void abort_job(Communicator& comm, int exit_code) {
    comm.abort(exit_code);
    std::_Exit(exit_code);
}

int run_with_mpi(Invocation& invocation, const nlohmann::json& options, const MpiBody& body, MpiThreadLevel threads) {
    MpiSession session(invocation.argc, invocation.argv, threads);
    auto control = MpiCommunicator::world();
    try {
        {
            const auto guard = start_up_guard(session, options);
            require_same_job(*control, command_of(invocation.arguments));
            throw_if_any_rank_failed(*control, std::nullopt, session.hosts_by_rank());
            require_same_options(*control, options, [&invocation](const std::string& flag) {
                return invocation.command != nullptr && invocation.command->get_option_no_throw(flag) != nullptr;
            });
        }
        return body(session, *control);
    } catch (const UsageError& error) {
        // Raised alike on every rank (agreed through rank_agreement where needed).
        if (session.world_rank() == 0) print_line(std::string("error: ") + error.what());
        control->barrier();
        return 2;
    } catch (const std::exception& error) {
        print_line("error: " + where(session) + ": " + error.what());
        abort_job(*control, 1);
    }
}

int join_failed_start(int& argc, char**& argv, const std::string& message) {
    const FallbackExit fallback("error: rank " + std::to_string(launcher_rank()) + " (" + host_name() + "): " + message,
                                std::chrono::seconds(30));
    MpiSession session(argc, argv);
    auto control = MpiCommunicator::world();
    try {
        require_same_job(*control, command_of(std::vector<std::string>(argv, argv + argc)));
    } catch (const UsageError& mixed) {  // the peers, in run_with_mpi, refuse it alike
        if (session.world_rank() == 0) print_line(std::string("error: ") + mixed.what());
        control->barrier();
        return 2;
    }
    const auto agreed = agree_on_error(*control, session.hosts_by_rank(), message);
    if (session.world_rank() == 0) print_line("error: " + agreed.value_or(message));
    control->barrier();
    return 2;
}

}  // namespace parbench

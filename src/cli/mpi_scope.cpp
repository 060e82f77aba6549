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

// Where this process runs, before MPI can say it: the launcher's rank and this host.
std::string where_before_mpi() { return "rank " + std::to_string(launcher_rank()) + " (" + host_name() + ")"; }

// MPI_Init and the start-up agreements wait for every rank of the launch; with --timeout they
// are bounded too, for a peer that never starts MPI (another program, a rank stuck before it)
// or never joins them (an older build, which makes other MPI calls first). Armed before
// MPI_Init, which is where such a peer leaves the others waiting.
std::optional<FallbackExit> start_up_guard(const nlohmann::json& options) {
    const double timeout_s = options.is_object() ? options.value("timeout_s", 0.0) : 0.0;
    if (!(timeout_s > 0)) return std::nullopt;
    std::ostringstream seconds;
    seconds << timeout_s;
    return std::optional<FallbackExit>(
        std::in_place,
        "error: watchdog: " + where_before_mpi() + " waited " + seconds.str() +
            " s (--timeout) for the other ranks to start MPI and agree on the build, command and flags: a rank runs "
            "another program or an older parbench build, or is stuck before starting MPI; launch every rank with the "
            "same build, command and flags",
        std::chrono::duration<double>(timeout_s), watchdog_exit_code);
}

// How long a rank that needs no MPI, or failed before starting it, waits for its peers to join
// the first agreement before it gives up on them (they run another program).
constexpr std::chrono::seconds peers_start_limit{30};

}  // namespace

void abort_job(Communicator& comm, int exit_code) {
    comm.abort(exit_code);
    std::_Exit(exit_code);
}

int run_with_mpi(Invocation& invocation, const nlohmann::json& options, const MpiBody& body, MpiThreadLevel threads) {
    auto guard = start_up_guard(options);
    MpiSession session(invocation.argc, invocation.argv, threads);
    auto control = MpiCommunicator::world();
    try {
        require_same_job(*control, what_rank_runs(invocation.arguments));
        throw_if_any_rank_failed(*control, std::nullopt, session.hosts_by_rank());
        require_same_options(*control, options, [&invocation](const std::string& flag) {
            return invocation.command != nullptr && invocation.command->get_option_no_throw(flag) != nullptr;
        });
        guard.reset();  // the watchdog (cli/job_watchdog.hpp) watches what follows
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

int join_failed_start(int& argc, char**& argv, const std::string& message, int exit_code) {
    const FallbackExit fallback("error: " + where_before_mpi() + ": " + message, peers_start_limit, exit_code);
    MpiSession session(argc, argv);
    auto control = MpiCommunicator::world();
    try {
        require_same_job(*control, what_rank_runs(std::vector<std::string>(argv, argv + argc)));
    } catch (const UsageError& mixed) {  // the peers, in run_with_mpi, refuse it alike
        if (session.world_rank() == 0) print_line(std::string("error: ") + mixed.what());
        control->barrier();
        return 2;
    }
    const auto agreed = agree_on_error(*control, session.hosts_by_rank(), message);
    if (session.world_rank() == 0) print_line("error: " + agreed.value_or(message));
    control->barrier();
    return exit_code;
}

int run_beside_peers(int& argc, char**& argv, const std::function<int()>& body) {
    if (launcher_world_size() < 2) return body();
    const std::string what = what_rank_runs(std::vector<std::string>(argv, argv + argc));
    bool first = false;
    {
        const FallbackExit fallback("error: " + where_before_mpi() + " runs '" + what +
                                        "', which needs no MPI, and waited " +
                                        std::to_string(peers_start_limit.count()) +
                                        " s for the other ranks of the launch to start MPI and agree that they run it "
                                        "too: a rank runs another program, or is stuck before starting MPI; launch "
                                        "every rank with the same command",
                                    peers_start_limit);
        MpiSession session(argc, argv);
        auto control = MpiCommunicator::world();
        try {
            require_same_job(*control, what);
            throw_if_any_rank_failed(*control, std::nullopt, session.hosts_by_rank());
        } catch (const UsageError& error) {
            if (session.world_rank() == 0) print_line(std::string("error: ") + error.what());
            control->barrier();
            return 2;
        }
        first = session.world_rank() == 0;
    }  // MPI ends here, on every rank at once: the first rank's command runs without it
    return first ? body() : 0;
}

bool mpi_was_started() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    return initialized != 0;
}

}  // namespace parbench

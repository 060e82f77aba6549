#include "cli/job_watchdog.hpp"

#include <unistd.h>

#include <iostream>

namespace parbench {

std::unique_ptr<Watchdog> start_watchdog(double timeout_s, const MpiSession& session, Communicator& control,
                                         std::function<void(const std::string& message)> on_hang,
                                         ProgressLines progress) {
    auto end_job = [on_hang = std::move(on_hang)](const std::string& message) {
        std::cerr << ("error: " + message + "\n") << std::flush;
        if (on_hang) on_hang(message);
        ::_exit(watchdog_exit_code);
    };
    if (timeout_s <= 0 || session.world_size() == 1)
        return std::make_unique<Watchdog>(timeout_s, session.world_rank(), end_job, nullptr,
                                          std::vector<std::string>{}, std::move(progress));
    std::string failure;
    auto channel = HeartbeatChannel::open(control, session.hosts_by_rank(), failure);
    if (!channel && session.world_rank() == 0)
        std::cerr << ("warning: --timeout: the watchdog's side channel could not be set up (" + failure +
                      "); a hang still ends the job, but the rank that caused it cannot be named\n")
                  << std::flush;
    return std::make_unique<Watchdog>(timeout_s, session.world_rank(), end_job, std::move(channel),
                                      session.hosts_by_rank(), std::move(progress));
}

}  // namespace parbench

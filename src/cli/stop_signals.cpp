#include "cli/stop_signals.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace parbench {
namespace {

constexpr int watched[] = {SIGINT, SIGTERM};
// What the handler reaches: the write end of the live StopSignals' pipe. A signal handler takes
// no argument to carry it, so this is the one place it can be; -1 while none is live.
std::atomic<int> live_pipe{-1};

extern "C" void on_signal(int number) {
    const int saved = errno;  // write() may change it under the interrupted code
    const int fd = live_pipe.load();
    if (fd >= 0) {
        const unsigned char byte = static_cast<unsigned char>(number);
        [[maybe_unused]] const ssize_t written = ::write(fd, &byte, 1);
    }
    errno = saved;
}

const char* signal_name(int number) { return number == SIGINT ? "SIGINT" : "SIGTERM"; }

}  // namespace

StopSignals::StopSignals(std::function<void(const std::string& signal)> keep, std::chrono::milliseconds linger) {
    if (::pipe2(pipe_, O_CLOEXEC) != 0)
        throw std::runtime_error(std::string("pipe2 for the signal watcher failed: ") + std::strerror(errno));
    int expected = -1;
    if (!live_pipe.compare_exchange_strong(expected, pipe_[1])) {
        ::close(pipe_[0]);
        ::close(pipe_[1]);
        throw std::logic_error("StopSignals: one at a time");
    }
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // MPI's and the kernels' calls go on; the watcher acts
    for (int i = 0; i < 2; ++i) ::sigaction(watched[i], &action, &previous_[i]);  // fails only for a bad number
    // A signal before the thread runs waits in the pipe.
    thread_ = std::thread(&StopSignals::watch, this, std::move(keep), linger);
}

StopSignals::~StopSignals() {
    for (int i = 0; i < 2; ++i) ::sigaction(watched[i], &previous_[i], nullptr);
    live_pipe.store(-1);
    const unsigned char wake = 0;  // not a signal: the watcher ends
    [[maybe_unused]] const ssize_t written = ::write(pipe_[1], &wake, 1);
    thread_.join();
    ::close(pipe_[0]);
    ::close(pipe_[1]);
}

void StopSignals::watch(std::function<void(const std::string&)> keep, std::chrono::milliseconds linger) {
    unsigned char byte = 0;
    for (;;) {
        const ssize_t got = ::read(pipe_[0], &byte, 1);
        if (got < 0 && errno == EINTR) continue;
        if (got != 1 || byte == 0) return;  // the destructor's wake-up
        break;
    }
    keep(signal_name(byte));
    std::this_thread::sleep_for(linger);
    ::_exit(128 + byte);
}

std::chrono::milliseconds stop_linger(int world_rank) {
    return world_rank == 0 ? std::chrono::milliseconds(0) : std::chrono::milliseconds(2000);
}

}  // namespace parbench

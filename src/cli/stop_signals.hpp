// SIGINT and SIGTERM while a measuring command runs. Open MPI's mpirun passes a Ctrl-C on to
// every rank as SIGCONT, then SIGTERM a second later, then SIGKILL a second after that
// (measured with Open MPI 4.1.4): a rank has about a second to keep what it measured. A thread
// of this object's own hears the signal (the handler only writes a byte to a pipe, what a
// handler may do) and calls `on_stop` with the signal's name, off the main thread, which may
// be inside MPI: it keeps what was measured (rewrites the report and trace saying why the run
// stopped), and unless it returns false to let the run end itself at its next boundary
// (requested()), the process then ends with 128 + the signal's number, as the signal would
// have ended it. One at a time; the previous handlers come back when it goes.
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace parbench {

class StopSignals {
  public:
    // `on_stop(signal)`: "SIGINT" or "SIGTERM"; true: end the process now.
    explicit StopSignals(std::function<bool(const std::string& signal)> on_stop);
    ~StopSignals();
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;

    // Whether a signal came (on_stop has run, or is running).
    bool requested() const { return requested_.load(); }

  private:
    void watch(std::function<bool(const std::string&)> on_stop);

    int pipe_[2] = {-1, -1};
    struct sigaction previous_[2] = {};  // SIGINT's and SIGTERM's handlers before
    std::atomic<bool> requested_{false};
    std::thread thread_;
};

}  // namespace parbench

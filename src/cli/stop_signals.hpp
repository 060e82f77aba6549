// SIGINT and SIGTERM while a measuring command runs. Open MPI's mpirun passes a Ctrl-C on to
// every rank as SIGCONT, then SIGTERM a second later, then SIGKILL a second after that
// (measured with Open MPI 4.1.4): a rank has about a second to keep what it measured. A thread
// of this object's own hears the signal (the handler only writes a byte to a pipe, what a
// handler may do) and calls `keep` with the signal's name, off the main thread, which may be
// inside MPI: it rewrites the report and trace saying why the run stopped. Then, after
// `linger`, the process ends with 128 + the signal's number, as the signal would have ended it.
// The rank that writes the files lingers not at all; the others a while, since mpirun kills the
// whole job as soon as one rank ends, which would stop the writing rank mid-file. One at a
// time; the previous handlers come back when it goes.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace parbench {

class StopSignals {
  public:
    // `keep(signal)`: "SIGINT" or "SIGTERM".
    StopSignals(std::function<void(const std::string& signal)> keep, std::chrono::milliseconds linger);
    ~StopSignals();
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;

  private:
    void watch(std::function<void(const std::string&)> keep, std::chrono::milliseconds linger);

    int pipe_[2] = {-1, -1};
    struct sigaction previous_[2] = {};  // SIGINT's and SIGTERM's handlers before
    std::thread thread_;
};

// How long a rank lingers after keeping what it has: world rank 0 writes the report and
// trace, and ends at once; the others wait two seconds, longer than mpirun takes to kill them.
std::chrono::milliseconds stop_linger(int world_rank);

}  // namespace parbench

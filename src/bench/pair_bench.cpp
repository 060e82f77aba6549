#include "bench/pair_bench.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "bench/pair_schedule.hpp"
#include "bench/statistics.hpp"

namespace parbench {
namespace {

// The calling thread's CPU time, in microseconds.
double thread_cpu_us() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

struct Exchange {
    double median_us = 0.0;
    double cpu_share = 0.0;  // CPU time / wall time over the timed samples
};

class PairTimer {
  public:
    PairTimer(Communicator& data, Communicator& control, Device& device, Watchdog& watchdog, std::uint64_t largest,
              double starved_us)
        : data_(data), control_(control), device_(device), watchdog_(watchdog), send_(device.allocate(largest)),
          recv_(device.allocate(largest)), timer_(device.make_timer()), starved_us_(starved_us) {
        device_.fill_zero(send_);  // first touch before any timing
        device_.fill_zero(recv_);
        device_.synchronize();
    }

    // Median microseconds of one exchange of `bytes` with `peer`, and this thread's CPU share
    // in the timed samples (read around each, outside the device timer's window).
    Exchange exchange(int peer, std::uint64_t bytes, int warmup, int iters) {
        const std::string operation = "sendrecv with rank " + std::to_string(peer);
        std::vector<double> samples;
        samples.reserve(static_cast<std::size_t>(iters));
        double cpu_us = 0.0, wall_us = 0.0;
        for (int i = 0; i < warmup + iters; ++i) {
            // Outside the timed window: the watchdog's bookkeeping never lengthens a sample.
            if (i == 0 || i == warmup) watchdog_.enter({i < warmup ? "warm-up" : "timed", operation, bytes, 0});
            watchdog_.advance(i < warmup ? i : i - warmup);
            char token = 0;
            char peer_token = 0;
            control_.sendrecv(&token, peer, &peer_token, peer, 1, DType::uint8);  // start together
            const double cpu_before = thread_cpu_us();
            const auto wall_before = std::chrono::steady_clock::now();
            timer_->start();
            if (starved_us_ > 0.0) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(starved_us_));
            data_.sendrecv(send_.data(), peer, recv_.data(), peer, static_cast<std::size_t>(bytes), DType::uint8);
            timer_->stop();
            const double us = timer_->elapsed_us();
            if (i < warmup) continue;
            samples.push_back(us);
            cpu_us += thread_cpu_us() - cpu_before;
            wall_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall_before).count();
        }
        return {summarize(samples).median, wall_us > 0.0 ? std::min(1.0, cpu_us / wall_us) : 1.0};
    }

  private:
    Communicator& data_;
    Communicator& control_;
    Device& device_;
    Watchdog& watchdog_;
    Buffer send_;
    Buffer recv_;
    std::unique_ptr<Timer> timer_;
    double starved_us_;  // fault injection: a sleep inside each timed exchange
};

// One round's figures, gathered to rank 0 into the matrices: each rank sends its peer's
// participant index (-1 when it sat the round out), the pair's latency and bandwidth, and its
// CPU share in the bandwidth samples.
void gather_round(Communicator& control, const std::vector<int>& participants, int peer_index, double latency_us,
                  double bandwidth_gbps, double cpu_share, PairMeasurements& measurements) {
    constexpr std::size_t fields = 4;
    const double mine[fields] = {static_cast<double>(peer_index), latency_us, bandwidth_gbps, cpu_share};
    std::vector<double> all(control.rank() == 0 ? fields * static_cast<std::size_t>(control.size()) : 0);
    control.gather(mine, all.data(), fields, DType::float64, 0);
    if (control.rank() != 0) return;
    for (std::size_t i = 0; i < participants.size(); ++i) {
        const double* figures = all.data() + fields * static_cast<std::size_t>(participants[i]);
        if (figures[0] < 0) continue;
        const auto j = static_cast<std::size_t>(figures[0]);
        measurements.latency_us[i][j] = figures[1];
        measurements.bandwidth_gbps[i][j] = figures[2];
        measurements.cpu_share[i][j] = figures[3];
    }
}

}  // namespace

PairMeasurements measure_pairs(Communicator& data, Communicator& control, Device& device,
                               const std::vector<int>& participants, const PairBenchOptions& options,
                               Watchdog& watchdog,
                               const std::function<void(const PairMeasurements& so_far)>& after_round) {
    const auto rounds = round_robin_rounds(static_cast<int>(participants.size()));
    const auto mine = std::find(participants.begin(), participants.end(), control.rank());
    const int my_index = mine == participants.end() ? -1 : static_cast<int>(mine - participants.begin());
    const double nan = std::numeric_limits<double>::quiet_NaN();
    PairMeasurements measurements;
    measurements.rounds = static_cast<int>(rounds.size());
    if (control.rank() == 0) {
        const std::vector<double> row(participants.size(), nan);
        measurements.bandwidth_gbps.assign(participants.size(), row);
        measurements.latency_us.assign(participants.size(), row);
        measurements.cpu_share.assign(participants.size(), row);
    }

    const std::uint64_t largest = std::max(options.bandwidth_bytes, options.latency_bytes);
    watchdog.enter({"setup", "allocating the exchange buffers", largest, 0});
    PairTimer timer(data, control, device, watchdog, largest,
                    options.inject_starved_rank == control.rank() ? options.inject_starved_us : 0.0);
    for (std::size_t round = 0; round < rounds.size(); ++round) {
        const std::string of_rounds = std::to_string(round + 1) + " of " + std::to_string(rounds.size());
        watchdog.enter({"barrier", "starting round " + of_rounds, 0, static_cast<int>(round)});
        control.barrier();
        int peer_index = -1;
        double latency = nan;
        double bandwidth = nan;
        double cpu_share = nan;
        for (const auto& [a, b] : rounds[round]) {
            if (a != my_index && b != my_index) continue;
            peer_index = a == my_index ? b : a;
            const int peer = participants[static_cast<std::size_t>(peer_index)];
            latency = timer.exchange(peer, options.latency_bytes, options.warmup, options.latency_iters).median_us;
            const Exchange large = timer.exchange(peer, options.bandwidth_bytes, options.warmup, options.iters);
            bandwidth = static_cast<double>(options.bandwidth_bytes) / (large.median_us * 1e3);
            cpu_share = large.cpu_share;
        }
        watchdog.enter({"results", "gathering round " + std::to_string(round + 1) + "'s figures", 0,
                        static_cast<int>(round)});
        gather_round(control, participants, peer_index, latency, bandwidth, cpu_share, measurements);
        measurements.rounds_measured = static_cast<int>(round + 1);
        if (control.rank() == 0) after_round(measurements);
    }
    // A rank that sat out the last round would otherwise leave while its peers still exchange
    // and wait in MPI_Finalize; should one of them hang, the job ends around it, and Open MPI
    // 4.1's mpirun, ending a rank inside MPI_Finalize's fence, crashed (PMIx_server_finalize) or
    // hung in 3 of 10 tries with a rank stopped (faults.sigstop_pairs). Here it waits, watched.
    watchdog.enter({"barrier", "ending the run", 0, measurements.rounds});
    control.barrier();
    watchdog.idle();
    return measurements;
}

}  // namespace parbench

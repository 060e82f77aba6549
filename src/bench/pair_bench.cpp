#include "bench/pair_bench.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "bench/pair_schedule.hpp"
#include "bench/statistics.hpp"

namespace parbench {
namespace {

class PairTimer {
  public:
    PairTimer(Communicator& data, Communicator& control, Device& device, std::uint64_t largest)
        : data_(data), control_(control), device_(device), send_(device.allocate(largest)),
          recv_(device.allocate(largest)), timer_(device.make_timer()) {
        device_.fill_zero(send_);  // first touch before any timing
        device_.fill_zero(recv_);
        device_.synchronize();
    }

    // Median microseconds of one exchange of `bytes` with `peer`.
    double median_exchange_us(int peer, std::uint64_t bytes, int warmup, int iters) {
        std::vector<double> samples;
        for (int i = 0; i < warmup + iters; ++i) {
            char token = 0;
            char peer_token = 0;
            control_.sendrecv(&token, peer, &peer_token, peer, 1, DType::uint8);  // start together
            timer_->start();
            data_.sendrecv(send_.data(), peer, recv_.data(), peer, static_cast<std::size_t>(bytes), DType::uint8);
            timer_->stop();
            const double us = timer_->elapsed_us();
            if (i >= warmup) samples.push_back(us);
        }
        return summarize(samples).median;
    }

  private:
    Communicator& data_;
    Communicator& control_;
    Device& device_;
    Buffer send_;
    Buffer recv_;
    std::unique_ptr<Timer> timer_;
};

std::vector<std::vector<double>> gather_rows(Communicator& control, const std::vector<double>& row,
                                             const std::vector<int>& participants) {
    const std::size_t n = row.size();
    std::vector<double> all(control.rank() == 0 ? n * static_cast<std::size_t>(control.size()) : 0);
    control.gather(row.data(), all.data(), n, DType::float64, 0);
    std::vector<std::vector<double>> matrix;
    if (control.rank() != 0) return matrix;
    for (int rank : participants)
        matrix.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(n * static_cast<std::size_t>(rank)),
                            all.begin() + static_cast<std::ptrdiff_t>(n * static_cast<std::size_t>(rank + 1)));
    return matrix;
}

}  // namespace

PairMeasurements measure_pairs(Communicator& data, Communicator& control, Device& device,
                               const std::vector<int>& participants, const PairBenchOptions& options) {
    const auto rounds = round_robin_rounds(static_cast<int>(participants.size()));
    const auto mine = std::find(participants.begin(), participants.end(), control.rank());
    const int my_index = mine == participants.end() ? -1 : static_cast<int>(mine - participants.begin());
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> bandwidth(participants.size(), nan);
    std::vector<double> latency(participants.size(), nan);

    PairTimer timer(data, control, device, std::max(options.bandwidth_bytes, options.latency_bytes));
    for (const auto& pairs : rounds) {
        control.barrier();
        for (const auto& [a, b] : pairs) {
            if (a != my_index && b != my_index) continue;
            const int peer_index = a == my_index ? b : a;
            const int peer = participants[static_cast<std::size_t>(peer_index)];
            latency[static_cast<std::size_t>(peer_index)] =
                timer.median_exchange_us(peer, options.latency_bytes, options.warmup, options.latency_iters);
            const double us = timer.median_exchange_us(peer, options.bandwidth_bytes, options.warmup, options.iters);
            bandwidth[static_cast<std::size_t>(peer_index)] = static_cast<double>(options.bandwidth_bytes) / (us * 1e3);
        }
    }
    control.barrier();
    PairMeasurements measurements;
    measurements.rounds = static_cast<int>(rounds.size());
    measurements.bandwidth_gbps = gather_rows(control, bandwidth, participants);
    measurements.latency_us = gather_rows(control, latency, participants);
    return measurements;
}

}  // namespace parbench

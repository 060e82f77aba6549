// Times every pair of participants with sendrecv, round by round (bench/pair_schedule.hpp):
// in each round the pairs exchange at once, each rank with its one peer; a pair meets on
// the control communicator before every sample so the two start together, and a barrier
// of all ranks separates rounds. A sample is one bidirectional exchange of `bytes` timed on
// the measuring rank; entry [i][j] is rank i's median with peer j. Each rank also measures how
// much of its bandwidth samples' wall time its thread ran on a CPU (its CPU share): a rank held
// off the CPU (a quota, a shared or oversubscribed core) shows it, a rank waiting on a slow
// link busy-polls and does not. After each round rank 0 gathers that round's figures, so a
// run that stops keeps every round it finished.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "bench/watchdog.hpp"
#include "comm/communicator.hpp"
#include "device/device.hpp"

namespace parbench {

struct PairBenchOptions {
    std::uint64_t bandwidth_bytes = 64ull << 20;
    std::uint64_t latency_bytes = 8;
    int warmup = 2;
    int iters = 5;           // samples per pair at bandwidth_bytes
    int latency_iters = 20;  // samples per pair at latency_bytes
    // Fault injection (tests): this rank sleeps so long inside each timed exchange, off the CPU
    // as a throttled rank is.
    std::optional<int> inject_starved_rank;
    double inject_starved_us = 2000.0;
};

struct PairMeasurements {
    int rounds = 0;           // of the whole schedule
    int rounds_measured = 0;  // finished so far
    // [i][j] over participant indices; the diagonal, and pairs of rounds not yet measured, are
    // NaN. Filled on rank 0 only.
    std::vector<std::vector<double>> bandwidth_gbps;  // bytes / median exchange time, decimal GB/s
    std::vector<std::vector<double>> latency_us;      // median exchange time at latency_bytes
    std::vector<std::vector<double>> cpu_share;       // rank i's thread CPU time / wall time in its samples with j
};

// Collective over `data` and `control` (same ranks). `participants`: world ranks measured,
// identical on every rank; the others only join the round barriers. Each rank tells
// `watchdog` what it waits in (the peer, the size, the sample, or a round's barrier), so a
// stopped rank is named. `after_round` runs on rank 0 after every round, with the figures
// so far (the caller rewrites its report with them).
PairMeasurements measure_pairs(Communicator& data, Communicator& control, Device& device,
                               const std::vector<int>& participants, const PairBenchOptions& options,
                               Watchdog& watchdog,
                               const std::function<void(const PairMeasurements& so_far)>& after_round);

}  // namespace parbench

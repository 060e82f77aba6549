#include "bench/host_links.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "bench/statistics.hpp"
#include "core/percentile.hpp"

namespace parbench {
namespace {

using Clock = std::chrono::steady_clock;

// The median of `samples` timings of `work`, in microseconds. Medians, as the harness reports:
// on a shared host a long loop's mean holds every preemption, a median of short samples does not.
double median_us(int samples, const std::function<void()>& work) {
    std::vector<double> times;
    for (int i = 0; i < samples; ++i) {
        const Clock::time_point start = Clock::now();
        work();
        times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    return percentile(times, 0.5);
}

// The slowest rank's value (the least bandwidth, the longest latency): every rank gets it.
double agreed(Communicator& comm, double mine, ReduceOp op) {
    double all = 0.0;
    comm.allreduce(&mine, &all, 1, DType::float64, op);
    return all;
}

struct Ring {
    int next = 0;
    int previous = 0;
};

Ring ring_of(const Communicator& comm) {
    return {(comm.rank() + 1) % comm.size(), (comm.rank() + comm.size() - 1) % comm.size()};
}

double step_latency_us(Communicator& comm) {
    double send = 0.0, receive = 0.0;
    const Ring ring = ring_of(comm);
    const auto step = [&] { comm.sendrecv(&send, ring.next, &receive, ring.previous, 1, DType::float64); };
    for (int i = 0; i < 20; ++i) step();
    comm.barrier();
    return agreed(comm, median_us(200, step), ReduceOp::max);
}

// One step timed as CollectiveHarness times a call: after a barrier, each rank its own exchange,
// the slowest rank's time for the sample; the median sample.
double call_latency_us(Communicator& comm) {
    constexpr std::size_t samples = 50;
    double send = 0.0, receive = 0.0;
    const Ring ring = ring_of(comm);
    std::vector<double> times;
    for (std::size_t i = 0; i < samples; ++i) {
        comm.barrier();
        const Clock::time_point start = Clock::now();
        comm.sendrecv(&send, ring.next, &receive, ring.previous, 1, DType::float64);
        times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    std::vector<double> slowest(samples);
    comm.allreduce(times.data(), slowest.data(), samples, DType::float64, ReduceOp::max);
    return percentile(slowest, 0.5);
}

// Bytes per microsecond is MB/s; / 1e3 is decimal GB/s.
double gbps(double bytes, double us) { return us > 0.0 ? bytes / us / 1e3 : 0.0; }

void reduce_into(float* y, const float* x, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) y[i] += x[i];
}

}  // namespace

HostLinks measure_host_links(Communicator& comm, Device& device, std::uint64_t max_working_set) {
    HostLinks links;
    links.ranks = comm.size();
    links.cpu = device.name();
    links.step_latency_us = comm.size() > 1 ? step_latency_us(comm) : 0.0;
    links.call_latency_us = comm.size() > 1 ? call_latency_us(comm) : 0.0;

    constexpr std::uint64_t smallest = std::uint64_t{64} << 10;
    constexpr std::uint64_t largest = std::uint64_t{64} << 20;
    const std::uint64_t top = std::clamp(max_working_set, smallest, largest);
    std::vector<std::uint64_t> sizes;
    for (std::uint64_t size = smallest; size <= top; size *= 16) sizes.push_back(size);
    if (sizes.back() < top) sizes.push_back(top & ~std::uint64_t{63});

    // One buffer for every size, touched before any timing (first touch is slow here: DESIGN.md);
    // zeros, so that the reduction never meets a denormal.
    Buffer buffer = device.allocate(top);
    char* base = buffer.as<char>();
    std::memset(base, 0, top);
    const Ring ring = ring_of(comm);
    for (const std::uint64_t size : sizes) {
        const std::size_t half = size / 2;
        // About 256 MiB per rank and kernel at the small sizes; at least 9 samples at the large ones.
        const int samples = std::clamp(static_cast<int>((std::uint64_t{256} << 20) / half), 9, 101);
        auto* x = reinterpret_cast<float*>(base);
        auto* y = reinterpret_cast<float*>(base + half);
        const auto copy = [&] { std::memcpy(base + half, base, half); };
        const auto reduce = [&] { reduce_into(y, x, half / sizeof(float)); };
        const auto exchange = [&] { comm.sendrecv(base, ring.next, base + half, ring.previous, half, DType::uint8); };
        HostBandwidth bandwidth;
        bandwidth.working_set_bytes = size;
        comm.barrier();
        copy();
        bandwidth.copy_gbps = agreed(comm, gbps(static_cast<double>(half), median_us(samples, copy)), ReduceOp::min);
        comm.barrier();
        reduce();
        bandwidth.reduce_gbps = agreed(comm, gbps(static_cast<double>(half), median_us(samples, reduce)), ReduceOp::min);
        if (comm.size() > 1) {
            comm.barrier();
            exchange();
            bandwidth.exchange_gbps =
                agreed(comm, gbps(static_cast<double>(half), median_us(samples, exchange)), ReduceOp::min);
        }
        links.bandwidths.push_back(bandwidth);
    }
    return links;
}

}  // namespace parbench

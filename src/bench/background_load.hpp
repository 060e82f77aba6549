// A declared load run beside a timed collective on every rank (--background), on a thread of its
// own, so that a row can say what the collective costs under it and what it costs the load:
//   gemm:N          cblas_sgemm of N x N matrices, again and again (GFLOP/s, 2 N^3 per call):
//                   a model's compute contending for the cores and memory the collective uses
//   stream:BYTES    STREAM's triad a = b + s c over three arrays of BYTES in all (GB/s, 3 arrays per
//                   pass, McCalpin's count): memory bandwidth taken from the collective's copies
//   collective:BYTES an all-reduce of BYTES (float32) on a second communicator of the same ranks,
//                   again and again (its busbw, GB/s): two communicators sharing the links, as
//                   overlapping gradient buckets do
// The CPU ranks' loads (MPI backend). A collective load needs MPI_THREAD_MULTIPLE (two threads
// call MPI at once), the others FUNNELED (only the main thread calls MPI).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "comm/communicator.hpp"
#include "device/device.hpp"

namespace parbench {

struct BackgroundSpec {
    enum class Kind { gemm, stream, collective };
    Kind kind = Kind::gemm;
    std::uint64_t size = 0;  // gemm: N; stream, collective: bytes
};
// "gemm", "gemm:512", "stream:64M", "collective:1M"; UsageError naming --background otherwise.
BackgroundSpec parse_background(const std::string& text);
std::string background_name(const BackgroundSpec& spec);  // "gemm:512", "stream:67108864"
std::string background_unit(const BackgroundSpec& spec);  // "GFLOP/s" or "GB/s"

// What a load did between start() and stop().
struct BackgroundTally {
    std::uint64_t units = 0;  // calls, passes or collectives
    double seconds = 0.0;
    double throughput = 0.0;  // in background_unit
};

class BackgroundLoad {
  public:
    // `comm`: the second communicator of a collective load (its ranks run it in step), else null.
    BackgroundLoad(const BackgroundSpec& spec, Device& device, std::unique_ptr<Communicator> comm);
    ~BackgroundLoad();  // stops a running load
    BackgroundLoad(const BackgroundLoad&) = delete;
    BackgroundLoad& operator=(const BackgroundLoad&) = delete;

    void start();
    // Stops after the unit in progress (a collective load: after the unit every rank has asked to
    // stop by, so call it on every rank) and returns the tally.
    BackgroundTally stop();

  private:
    void run();
    void one_unit();
    double work_per_unit() const;  // flops or bytes

    BackgroundSpec spec_;
    std::unique_ptr<Communicator> comm_;
    Buffer a_, b_, c_;
    std::size_t elements_ = 0;  // per array
    std::atomic<bool> stopping_{false};
    std::atomic<std::uint64_t> units_{0};
    std::thread thread_;
    double started_ = 0.0;
};

}  // namespace parbench

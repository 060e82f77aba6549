// A declared load run beside a timed collective on every rank (--background), on a thread of its
// own, so that a row can say what the collective costs under it and what it costs the load:
//   gemm:N          an SGEMM of N x N matrices, again and again (GFLOP/s, 2 N^3 per call):
//                   a model's compute contending for what the collective uses
//   stream:BYTES    STREAM's triad a = b + s c over three arrays of BYTES in all (GB/s, 3 arrays per
//                   pass, McCalpin's count; kernels/stream_triad_math.hpp): memory bandwidth taken
//                   from the collective's copies
//   collective:BYTES an all-reduce of BYTES (float32) on a second communicator of the same ranks,
//                   again and again (its busbw, GB/s): two communicators sharing the links, as
//                   overlapping gradient buckets do
// On CPU ranks (MPI backend) the thread runs the load itself: cblas_sgemm, the triad loop, an MPI
// all-reduce. A collective load needs MPI_THREAD_MULTIPLE there (two threads call MPI at once), the
// others FUNNELED (only the main thread calls MPI). On GPUs (NCCL backend) the thread feeds the
// load to a CUDA stream of its own on the rank's GPU (bench/gpu_background_load.hpp), so it runs
// beside the collective's stream; the units are the same, and so are the throughputs' conventions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "bench/load_loop.hpp"
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

// float32 elements in each of the load's arrays: N^2 for gemm, a third of the bytes for stream,
// the all-reduced bytes for collective.
std::size_t background_elements(const BackgroundSpec& spec);
// The work of one unit in its throughput's measure: 2 N^3 flops, 3 arrays of bytes, or the
// all-reduce's bus bytes over `ranks` (nccl-tests' 2 (n-1)/n).
double background_work_per_unit(const BackgroundSpec& spec, int ranks);
// `units` of the load done in `seconds`, as stop() reports them.
BackgroundTally background_tally(const BackgroundSpec& spec, int ranks, std::uint64_t units, double seconds);

class BackgroundLoad {
  public:
    virtual ~BackgroundLoad() = default;  // a running load is stopped first
    virtual void start() = 0;
    // Stops after the unit in progress (a collective load: after the unit every rank has asked to
    // stop by, so call it on every rank) and returns the tally.
    virtual BackgroundTally stop() = 0;
};

// The load of `spec` on `device`: on a CPU a thread that runs it; on a GPU (through the CUDA
// plugin) a thread that feeds it to a stream of its own. A collective load splits its second
// communicator off `data`, so every rank of `data` makes its load at the same point.
std::unique_ptr<BackgroundLoad> make_background_load(const BackgroundSpec& spec, Device& device, Communicator& data);

// The CPU ranks' load: the thread runs each unit itself.
class CpuBackgroundLoad final : public BackgroundLoad {
  public:
    // `comm`: the second communicator of a collective load (its ranks run it in step), else null.
    CpuBackgroundLoad(const BackgroundSpec& spec, Device& device, std::unique_ptr<Communicator> comm);
    ~CpuBackgroundLoad() override;
    CpuBackgroundLoad(const CpuBackgroundLoad&) = delete;
    CpuBackgroundLoad& operator=(const CpuBackgroundLoad&) = delete;

    void start() override;
    BackgroundTally stop() override;

  private:
    class Queue;

    BackgroundSpec spec_;
    std::unique_ptr<Communicator> comm_;
    Buffer a_, b_, c_;
    std::unique_ptr<Queue> queue_;
    std::uint64_t units_ = 0;  // written by the load's thread, read after it is joined
    double started_ = 0.0;
    LoadThread thread_;        // last: stopped before what it uses goes
};

}  // namespace parbench

// Times one collective at one size the way DESIGN.md's measurement contract says:
// warm-up, then per-iteration (barrier, start, op, device sync, stop) or batched
// (barrier, N ops, sync, time / N) samples; every rank's own times, arrivals and finishes
// come back to every rank (bench/rank_times.hpp aggregates them over ranks); then, when
// asked, validated runs on fresh inputs (one by default).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/rank_times.hpp"
#include "bench/thread_counters.hpp"
#include "bench/watchdog.hpp"
#include "collectives/collective.hpp"
#include "comm/communicator.hpp"
#include "device/device.hpp"

namespace parbench {

enum class TimingMode { per_iteration, batched };
std::string timing_mode_name(TimingMode mode);

struct TimingOptions {
    int warmup = 5;
    int iters = 20;         // samples
    TimingMode mode = TimingMode::per_iteration;
    int batch_size = 10;    // ops per sample in batched mode
    bool graph = false;     // replay a captured CUDA graph of the op(s) instead of launching
    std::optional<int> inject_hang_rank;  // fault injection: this rank stops in its first timed iteration
    // Fault injection: after each iteration's barrier this rank sleeps this long before it
    // starts the op, so it arrives late (a straggler the others wait for).
    std::optional<int> inject_straggler_rank;
    // Fault injection: every rank stretches each timed op to 1/inject_slowdown of its own time
    // (spinning after it, inside the timer), so a point's busbw reads about inject_slowdown x
    // what it measures without; 1: off. Plants a known regression for compare's gate.
    double inject_slowdown = 1.0;
    double inject_straggler_us = 2000.0;
    // Where the data start past their allocation's (page-aligned on CPU) beginning: the send
    // and the receive buffer out of place, the one buffer at recv_offset_bytes in place. The
    // relative placement of the two matters on CPUs (4K aliasing, docs/reproducing.md); multiples of the element size.
    std::size_t send_offset_bytes = 0;
    std::size_t recv_offset_bytes = 0;
    // IMB-MPI1's -off_cache: 0 keeps one send and one receive buffer, which every iteration
    // finds in cache from the one before (nccl-tests, OSU and IMB by default). Above 0 the calls
    // run in turn on as many page-aligned copies of the buffers (slots) as this many bytes hold,
    // every slot written before timing, so a call's buffers were last touched about this many
    // bytes of other slots ago, as inside a training step, where the compute between two calls
    // evicts their buffers (on this 2-core VM a 1 MiB reduce-scatter ran 2.9x slower on buffers
    // rotated through 32 MiB or more than on hot ones: results/2026-12-05-off-cache).
    std::size_t off_cache_bytes = 0;
    // The pure communication time of the non-blocking benchmarks (IMB-NBC's Iallreduce_pure,
    // "MPI_Iallreduce/MPI_Wait"; OSU's osu_iallreduce before its compute phase): each op is the
    // collective's MPI_I* form and its wait, back to back (Collective::start), in place of the
    // blocking call. What a CPU
    // training step's overlapped buckets cost where nothing progresses them between the calls
    // (Open MPI's libnbc schedules, plan/host_overlap.hpp).
    bool nonblocking = false;
};

struct PointSpec {
    const Collective* collective = nullptr;
    std::size_t count = 0;  // elements of the full buffer (nccl-tests' size / element size)
    CollectiveParams params;
    bool inplace = false;
    bool check = false;
    int check_runs = 1;  // validated runs when checking, their wrong elements summed (nccl-tests' -c N)
};

struct PointMeasurement {
    RankTimes times;                     // every rank's, identical on all ranks
    std::optional<std::uint64_t> wrong;  // elements wrong over all ranks, when checked
    // Every rank's timing-thread counters across the timed loop (its barriers included),
    // read before the first and after the last iteration; and the ops each rank ran there.
    std::vector<ThreadCounters> counters_by_rank;
    std::uint64_t calls_per_rank = 0;
};

class CollectiveHarness {
  public:
    // `data` runs the collectives on `device` memory; `control` (MPI, host memory) carries
    // the harness's own bookkeeping so it never shows in the data communicator's counts.
    CollectiveHarness(Communicator& data, Communicator& control, Device& device, TimingOptions options,
                      Watchdog& watchdog);
    PointMeasurement measure(const PointSpec& spec);
    const Communicator& data() const { return data_; }

  private:
    struct Pointers {
        const void* send;
        void* recv;
        Buffer* input_buffer;
        std::size_t input_offset;
        Buffer* output_buffer;
        std::size_t output_offset;
    };
    // The slots a point's calls run on in turn: one without off_cache_bytes.
    std::vector<Pointers> prepare_slots(const PointSpec& spec, const BufferShape& shape);
    void fill_inputs(const PointSpec& spec, const BufferShape& shape, const Pointers& pointers);
    void fill_output(const PointSpec& spec, const BufferShape& shape, const Pointers& pointers);
    // The warm-up and timed calls, each on the next of `ops` (one per slot) in turn.
    RankTimes time_samples(const PointSpec& spec, const std::vector<std::unique_ptr<PreparedCall>>& ops,
                           std::uint64_t bytes, PointMeasurement& counted);
    std::uint64_t count_wrong(const PointSpec& spec, const BufferShape& shape, const Pointers& pointers,
                              PreparedCall& op);
    Buffer& grow(Buffer& buffer, std::size_t bytes);
    // The calls one timed sample runs: a batch when batched, else one.
    int ops_per_sample() const { return options_.mode == TimingMode::batched ? options_.batch_size : 1; }

    Communicator& data_;
    Communicator& control_;
    Device& device_;
    TimingOptions options_;
    Watchdog& watchdog_;
    Buffer send_;
    Buffer recv_;
};

// Every rank's series of one point to every rank (rank-major), over `control`: the harness's own
// times, and any other timed loop's (bench/moe_dispatch.cpp).
RankTimes gather_rank_times(Communicator& control, const std::vector<double>& own, const std::vector<double>& arrival,
                            const std::vector<double>& finish);

// The input pattern of `rank` for a collective with these parameters.
InputPattern input_pattern(const Collective& collective, const CollectiveParams& params, int nranks, int rank);

}  // namespace parbench

#include "bench/collective_harness.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/nvtx.hpp"
#include "core/error.hpp"

namespace parbench {

std::string timing_mode_name(TimingMode mode) {
    return mode == TimingMode::per_iteration ? "per-iter" : "batched";
}

InputPattern input_pattern(const Collective& collective, const CollectiveParams& params, int nranks, int rank) {
    InputPattern pattern;
    pattern.op = params.op;
    pattern.reducing = collective.reducing();
    pattern.nranks = nranks;
    pattern.rank = rank;
    pattern.modulus = choose_modulus(params.type, params.op, collective.reducing(), nranks);
    return pattern;
}

CollectiveHarness::CollectiveHarness(Communicator& data, Communicator& control, Device& device,
                                     TimingOptions options, Watchdog& watchdog)
    : data_(data), control_(control), device_(device), options_(options), watchdog_(watchdog) {}

// Buffers only grow, so a sweep touches each page once, before any timing.
Buffer& CollectiveHarness::grow(Buffer& buffer, std::size_t bytes) {
    if (buffer.bytes() < bytes || buffer.data() == nullptr) buffer = device_.allocate(bytes);
    return buffer;
}

namespace {

// Slots start a page apart, so each keeps the placement past a page that the offsets give.
constexpr std::size_t slot_alignment = 4096;

std::size_t round_to_slot(std::size_t bytes) {
    return (bytes + slot_alignment - 1) / slot_alignment * slot_alignment;
}

// The receive buffer's contents before a call, unlike any rank's input (count_wrong's check
// that the call wrote every element).
InputPattern sentinel_pattern(int nranks) {
    InputPattern sentinel;
    sentinel.rank = nranks + 17;
    sentinel.modulus = 97;
    return sentinel;
}

}  // namespace

std::vector<CollectiveHarness::Pointers> CollectiveHarness::prepare_slots(const PointSpec& spec,
                                                                          const BufferShape& shape) {
    const std::size_t element = dtype_size(spec.params.type);
    const std::size_t send_shift = options_.send_offset_bytes / element;
    const std::size_t recv_shift = options_.recv_offset_bytes / element;
    const std::size_t send_span = spec.inplace ? 0 : (send_shift + shape.send_count) * element;
    const std::size_t recv_span = (recv_shift + (spec.inplace ? shape.inplace_count : shape.recv_count)) * element;
    const bool off_cache = options_.off_cache_bytes > 0;
    const std::size_t send_stride = off_cache ? round_to_slot(send_span) : send_span;
    const std::size_t recv_stride = off_cache ? round_to_slot(recv_span) : recv_span;
    // Enough slots that the others' buffers fill off_cache_bytes between two uses of one.
    const std::size_t slots =
        off_cache ? std::max<std::size_t>(1, (options_.off_cache_bytes + send_stride + recv_stride - 1) /
                                                 (send_stride + recv_stride))
                  : 1;
    std::vector<Pointers> pointers;
    if (spec.inplace) {
        Buffer& shared = grow(recv_, (slots - 1) * recv_stride + recv_span);
        for (std::size_t k = 0; k < slots; ++k) {
            const std::size_t base = k * recv_stride / element + recv_shift;
            const std::size_t send_at = base + shape.inplace_send_offset;
            const std::size_t recv_at = base + shape.inplace_recv_offset;
            char* data = shared.as<char>();
            pointers.push_back({data + send_at * element, data + recv_at * element, &shared, send_at, &shared, recv_at});
        }
        return pointers;
    }
    Buffer& send = grow(send_, (slots - 1) * send_stride + send_span);
    Buffer& recv = grow(recv_, (slots - 1) * recv_stride + recv_span);
    for (std::size_t k = 0; k < slots; ++k) {
        const std::size_t send_at = k * send_stride / element + send_shift;
        const std::size_t recv_at = k * recv_stride / element + recv_shift;
        pointers.push_back({send.as<char>() + send_at * element, recv.as<char>() + recv_at * element, &send, send_at,
                            &recv, recv_at});
    }
    return pointers;
}

void CollectiveHarness::fill_inputs(const PointSpec& spec, const BufferShape& shape, const Pointers& pointers) {
    const InputPattern pattern = input_pattern(*spec.collective, spec.params, data_.size(), data_.rank());
    device_.fill_input(*pointers.input_buffer, pointers.input_offset, shape.send_count, spec.params.type, pattern);
}

void CollectiveHarness::fill_output(const PointSpec& spec, const BufferShape& shape, const Pointers& pointers) {
    device_.fill_input(*pointers.output_buffer, pointers.output_offset, shape.recv_count, spec.params.type,
                       sentinel_pattern(data_.size()));
}

RankTimes CollectiveHarness::time_samples(const PointSpec& spec, const std::vector<std::unique_ptr<PreparedCall>>& ops,
                                          std::uint64_t bytes, PointMeasurement& counted) {
    const std::string name(spec.collective->name());
    std::size_t calls = 0;
    const auto run_next = [&] { ops[calls++ % ops.size()]->run(); };
    auto run_ops = [&] {
        for (int i = 0; i < ops_per_sample(); ++i) run_next();
    };

    {
        NvtxRange range("warmup");
        for (int i = 0; i < options_.warmup; ++i) {
            watchdog_.enter({"warm-up", name, bytes, i});
            const NvtxRange call(name);
            run_next();
        }
        data_.synchronize();
    }

    std::unique_ptr<CapturedWork> graph;
    if (options_.graph) {
        graph = device_.capture(run_ops);
        if (!graph) throw UsageError("--graph needs a device that can capture work (CUDA); drop --graph on CPU");
    }

    using Clock = std::chrono::steady_clock;
    const auto since_us = [](Clock::time_point from) {
        return std::chrono::duration<double, std::micro>(Clock::now() - from).count();
    };
    const std::size_t iters = static_cast<std::size_t>(options_.iters);
    std::vector<double> own(iters), arrival(iters), finish(iters);
    auto timer = device_.make_timer();
    const char* range_name = options_.mode == TimingMode::batched ? "batch" : "iteration";
    const bool straggle = options_.inject_straggler_rank == data_.rank();
    const bool slow = options_.inject_slowdown < 1.0;
    const auto straggle_for = std::chrono::duration<double, std::micro>(options_.inject_straggler_us);
    const ThreadCounters counters_before = read_thread_counters();
    for (std::size_t i = 0; i < iters; ++i) {
        // The injected hang stops before entering the iteration, as a rank that never arrives.
        if (i == 0 && options_.inject_hang_rank == data_.rank()) {
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // waits for the watchdog
        }
        if (i == 0)
            watchdog_.enter({"timed", name, bytes, 0});
        else
            watchdog_.advance(static_cast<int>(i));
        data_.barrier();
        // Every rank leaves the barrier at about the same moment: the common time base of
        // arrivals and finishes, without synchronising clocks across hosts.
        const Clock::time_point released = Clock::now();
        if (straggle) std::this_thread::sleep_for(straggle_for);
        NvtxRange range(range_name);
        arrival[i] = since_us(released);
        {
            // The prepared op names no call (nor does the communicator while the harness
            // times: CountedCall): the op's range opens before the timer starts and closes
            // after it stops, one per iteration or around a batch, out of the window.
            const NvtxRange call(name);
            timer->start();
            const Clock::time_point op_started = slow ? Clock::now() : Clock::time_point{};
            if (graph)
                graph->replay();
            else
                run_ops();
            if (slow) {
                device_.synchronize();
                const auto until = op_started + (Clock::now() - op_started) / options_.inject_slowdown;
                while (Clock::now() < until) {
                    // spins: a sleep would wake late, by the scheduler's tick rather than the op's time
                }
            }
            timer->stop();
        }
        own[i] = timer->elapsed_us() / ops_per_sample();
        finish[i] = since_us(released);
    }
    const ThreadCounters counters_after = read_thread_counters();
    // Every wait on the other ranks is watched, bookkeeping included: a rank stopped while
    // the others gather would otherwise leave them waiting in an "idle" that never times out.
    watchdog_.enter({"results", "gathering rank times", bytes, 0});
    RankTimes times = gather_rank_times(control_, own, arrival, finish);
    counted.counters_by_rank = gather_thread_counters(counters_between(counters_before, counters_after), control_);
    counted.calls_per_rank = iters * static_cast<std::uint64_t>(ops_per_sample());
    watchdog_.idle();
    return times;
}

// Outside timing: every rank's series to every rank, on the control communicator.
RankTimes gather_rank_times(Communicator& control, const std::vector<double>& own, const std::vector<double>& arrival,
                            const std::vector<double>& finish) {
    RankTimes times;
    times.ranks = control.size();
    times.iterations = static_cast<int>(own.size());
    const std::size_t total = own.size() * static_cast<std::size_t>(times.ranks);
    times.own_us.resize(total);
    times.arrival_us.resize(total);
    times.finish_us.resize(total);
    control.allgather(own.data(), times.own_us.data(), own.size(), DType::float64);
    control.allgather(arrival.data(), times.arrival_us.data(), arrival.size(), DType::float64);
    control.allgather(finish.data(), times.finish_us.data(), finish.size(), DType::float64);
    return times;
}

// Fresh inputs, a receive buffer filled with other data, one run, then every element of
// every rank compared with the shared formulas.
std::uint64_t CollectiveHarness::count_wrong(const PointSpec& spec, const BufferShape& shape,
                                             const Pointers& pointers, PreparedCall& op) {
    NvtxRange range("check");
    const Collective& collective = *spec.collective;
    fill_inputs(spec, shape, pointers);
    // Out of place on MPI, broadcast's root sends from its input and writes no output
    // (collective.hpp): its input must still hold the data every rank received.
    const bool result_in_input = !spec.inplace && collective.rooted() && data_.rank() == spec.params.root &&
                                 !collective.root_output_written(data_);
    if (!spec.inplace && !result_in_input) fill_output(spec, shape, pointers);
    watchdog_.enter({"check", std::string(collective.name()), spec.count * dtype_size(spec.params.type), 0});
    {
        const NvtxRange call(std::string(collective.name()));
        op.run();  // the very call that was timed
    }
    data_.synchronize();
    watchdog_.idle();

    std::uint64_t wrong = 0;
    const InputPattern pattern = input_pattern(collective, spec.params, data_.size(), data_.rank());
    const Buffer& result = result_in_input ? *pointers.input_buffer : *pointers.output_buffer;
    const std::size_t result_offset = result_in_input ? pointers.input_offset : pointers.output_offset;
    const std::size_t result_count = result_in_input ? shape.send_count : shape.recv_count;
    for (const ExpectedSegment& segment :
         collective.expected_segments(spec.count, data_.size(), data_.rank(), spec.params, pattern, result_count))
        wrong += device_.count_wrong(result, result_offset + segment.offset, segment.count, spec.params.type,
                                     segment.layout);
    std::uint64_t total = 0;
    watchdog_.enter({"check", "summing wrong elements", spec.count * dtype_size(spec.params.type), 0});
    control_.allreduce(&wrong, &total, 1, DType::uint64, ReduceOp::sum);
    watchdog_.idle();
    return total;
}

PointMeasurement CollectiveHarness::measure(const PointSpec& spec) {
    // The harness's own timing replaces the communicator's per-call accounting while it runs.
    const PausedCounting paused(data_.stats());
    const Collective& collective = *spec.collective;
    const std::uint64_t bytes = spec.count * dtype_size(spec.params.type);
    // The placement is in the name: both halves of a row are measured, and Nsight should tell them apart.
    NvtxRange range(std::string(collective.name()) + " " + std::to_string(bytes) + "B " +
                    (spec.inplace ? "in-place" : "out-of-place"));
    const BufferShape shape = collective.shape(spec.count, data_.size(), data_.rank(), spec.params);
    const std::vector<Pointers> slots = prepare_slots(spec, shape);
    // Off cache every slot is written, in order, so that the first ones' lines have left the
    // caches when the calls start on them; out of place the receive buffers too.
    for (const Pointers& slot : slots) {
        fill_inputs(spec, shape, slot);
        if (options_.off_cache_bytes > 0 && !spec.inplace) fill_output(spec, shape, slot);
    }
    device_.synchronize();

    // Every decision about the call's arguments is taken here, once per slot the calls reach:
    // the timed window and the check repeat the backend's call alone (Communicator::prepare).
    const std::size_t calls = static_cast<std::size_t>(options_.warmup) +
                              static_cast<std::size_t>(options_.iters) * static_cast<std::size_t>(ops_per_sample());
    std::vector<std::unique_ptr<PreparedCall>> ops;
    for (std::size_t k = 0; k < std::min(slots.size(), std::max<std::size_t>(calls, 1)); ++k) {
        if (options_.nonblocking) {
            // A request is the backend's to make on every call: the base prepare repeats the
            // start and the wait as they are (a backend's own prepare records blocking calls only).
            ops.push_back(data_.Communicator::prepare([&, k] {
                collective.start(data_, slots[k].send, slots[k].recv, spec.count, spec.params).wait();
            }));
            continue;
        }
        ops.push_back(data_.prepare(
            [&, k] { collective.run(data_, slots[k].send, slots[k].recv, spec.count, spec.params); }));
    }
    PointMeasurement measurement;
    measurement.times = time_samples(spec, ops, bytes, measurement);
    if (spec.check) {
        // On the last slot the calls reached: off cache, one past the first page-aligned copy.
        const std::size_t last = ops.size() - 1;
        measurement.wrong = 0;
        for (int run = 0; run < spec.check_runs; ++run)
            *measurement.wrong += count_wrong(spec, shape, slots[last], *ops[last]);
    }
    return measurement;
}

}  // namespace parbench

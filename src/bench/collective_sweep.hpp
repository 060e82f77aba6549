// A collective size sweep (`parbench <collective>`, `parbench all`): which points it measures, in
// which order, and why a point's measurement failed, typed. The command (cli/collective_command.cpp)
// supplies what happens at each point: building the report's result (report/ sits above bench/),
// the console row, the report kept so far.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "bench/collective_harness.hpp"
#include "core/error.hpp"

namespace parbench {

struct SweepPoint {
    const Collective* collective = nullptr;
    const CollectiveParams* params = nullptr;  // one of the collective's cases (type, op, ...)
    std::uint64_t requested_bytes = 0;
    bool inplace = false;
    int sweep = 1;  // which repetition of the whole sweep (--repeat), from 1
};

// What the command does around the points: the cases each collective runs, at each collective's
// start in each sweep (its console columns), at each point, and when a row's halves (out of
// place, then in place) are both measured.
struct SweepSteps {
    std::function<std::vector<CollectiveParams>(const Collective&)> cases;
    std::function<void(const Collective&, int sweep)> begin_collective;
    std::function<void(const SweepPoint&)> measure;
    std::function<void()> end_row;
};

struct SweepPlacements {
    bool out_of_place = true;
    bool in_place = false;
};

// `repeat` sweeps (0: until the run is stopped), each over every collective in turn, each of its
// cases, each size in the order given, each size's out-of-place half before its in-place half:
// the rows of nccl-tests' table.
void run_sweep(std::span<const Collective* const> collectives, const std::vector<std::uint64_t>& sizes,
               SweepPlacements placements, int repeat, const SweepSteps& steps);

// Why a point could not be measured. device_allocation: the device refused the send and receive
// buffers (core/allocation_failure.hpp); host_memory: the host ran out (std::bad_alloc), the
// samples included.
enum class PointFailureKind { device_allocation, host_memory };

class PointFailure : public RuntimeFailure {
  public:
    PointFailure(PointFailureKind kind, const std::string& message) : RuntimeFailure(message), kind_(kind) {}
    PointFailureKind kind() const { return kind_; }

  private:
    PointFailureKind kind_;
};

// harness.measure(spec); an allocation failure comes back as a PointFailure naming the collective
// and the point's `bytes`, any other failure as it was.
PointMeasurement measure_sweep_point(CollectiveHarness& harness, const PointSpec& spec, std::uint64_t bytes);

}  // namespace parbench

#include "bench/collective_sweep.hpp"

#include <new>
#include <string>

#include "core/allocation_failure.hpp"

namespace parbench {

void run_sweep(std::span<const Collective* const> collectives, const std::vector<std::uint64_t>& sizes,
               SweepPlacements placements, int repeat, const SweepSteps& steps) {
    for (int sweep = 1; repeat == 0 || sweep <= repeat; ++sweep)
        for (const Collective* collective : collectives) {
            steps.begin_collective(*collective, sweep);
            for (const CollectiveParams& params : steps.cases(*collective))
                for (std::uint64_t requested : sizes) {
                    for (bool inplace : {false, true}) {
                        if (inplace ? !placements.in_place : !placements.out_of_place) continue;
                        steps.measure(SweepPoint{collective, &params, requested, inplace, sweep});
                    }
                    steps.end_row();
                }
        }
}

PointMeasurement measure_sweep_point(CollectiveHarness& harness, const PointSpec& spec, std::uint64_t bytes) {
    const std::string point = std::string(spec.collective->name()) + " at " + std::to_string(bytes) + " B";
    try {
        return harness.measure(spec);
    } catch (const AllocationFailure& failure) {
        throw PointFailure(PointFailureKind::device_allocation,
                           "allocating the send and receive buffers of " + point + " failed (" + failure.what() + ")");
    } catch (const std::bad_alloc&) {
        throw PointFailure(PointFailureKind::host_memory, "allocating the buffers of " + point + " failed: out of memory");
    }
}

}  // namespace parbench

// --repeat K: a collective run measures its whole sweep K times (nccl-tests' -N), each point once
// per sweep, so that one report holds the spread BETWEEN runs of a point and not only that of one
// run's iterations. The two differ: back-to-back runs of one point differ by more than a run's
// own iterations suggest (DESIGN.md: 107-300 us for the same 1 MiB allreduce), and compare
// judges a difference by the spread between runs (report/run_noise.hpp), which a single sweep
// cannot show.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "report/collective_result.hpp"

namespace parbench {

// One point as two or more sweeps measured it.
struct PointSpread {
    const CollectiveResult* first = nullptr;  // its first sweep's result: what the point is
    std::vector<double> time_us;              // each sweep's reported time, in sweep order
    std::vector<double> busbw_gbps;
    double spread = 0.0;  // (largest - smallest) / median of time_us
};

// The measured points that two or more sweeps measured, in the order first measured; a point is
// its collective, size, type, op, placement and skew (what compare lines up).
std::vector<PointSpread> repetition_spreads(const std::vector<CollectiveResult>& results);

// The report's "repetitions" section: K as requested (0: until stopped), the whole sweeps among
// `results` (`points_per_sweep` each, in order), and every point's spread.
nlohmann::json repetitions_json(const std::vector<CollectiveResult>& results, int requested,
                                std::size_t points_per_sweep);

// "# run-to-run spread over 5 sweeps: median 4.1 % of a point's time, largest 23.0 % (allreduce
// 8 B in-place)", for the console's close; nothing without spreads.
std::optional<std::string> spread_line(const std::vector<PointSpread>& spreads, std::size_t sweeps);

}  // namespace parbench

// --background for the collective commands: every point measured again while a declared load
// runs beside it on every rank (bench/background_load.hpp), and the load's own throughput measured
// alone and under the collective. Each row's "background" then holds the time alone and under load,
// the slowdown, the load's throughput without and with the collective, and the wrong elements of
// the check run under load (counted into the point's, so wrong data under load fails the run).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/background_load.hpp"
#include "bench/collective_harness.hpp"
#include "comm/mpi_session.hpp"
#include "report/collective_result.hpp"

namespace parbench {

// The thread level the load needs: MULTIPLE for a collective load, FUNNELED otherwise; the
// requested level is raised to it from the default, and refused (naming both flags) when asked
// for lower.
MpiThreadLevel background_thread_level(const BackgroundSpec& spec, MpiThreadLevel requested, bool requested_given);

class BackgroundRunner {
  public:
    // Collective over `data` (a collective load splits its second communicator off it). On a GPU
    // device the load runs on a stream of its own (bench/gpu_background_load.hpp).
    BackgroundRunner(const BackgroundSpec& spec, Communicator& data, Communicator& control, Device& device);
    // The point of `spec` again under the load (its check too, when checked), and the load alone
    // for as long as the point's own measurement took (50 ms to 1 s); every rank alike.
    void measure_under_load(CollectiveHarness& harness, const PointSpec& spec, CollectiveResult& result,
                            const std::vector<std::string>& hosts, int timed_calls);

  private:
    BackgroundSpec spec_;
    Communicator& control_;
    std::unique_ptr<BackgroundLoad> load_;
};

// "#   under gemm:512: out-of-place 12.3 us x1.85, gemm 10.2 -> 8.1 GFLOP/s", or "" without one.
std::string background_line(const CollectiveResult& result);

}  // namespace parbench

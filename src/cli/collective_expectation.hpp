// Expected values and verdicts for the collective commands (issue 35): the flags, the model the
// run judges its points against (a --cluster file's links, or this host measured with
// --expect-host: plan/expected_collective.hpp), each point's verdict (report/verdict.hpp), and
// the --min-ratio gate, nccl-tests' NCCL_TESTS_MIN_BW applied point by point against what the
// point should reach.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"
#include "device/device.hpp"
#include "plan/cluster.hpp"
#include "plan/expected_collective.hpp"
#include "report/collective_result.hpp"

namespace parbench {

struct ExpectationOptions {
    std::string cluster;  // --cluster FILE or a device preset name
    bool expect_host = false;
    std::optional<double> min_ratio;
};
void add_expectation_flags(CLI::App& sub, ExpectationOptions& options);

// The options checked, before MPI starts.
struct ExpectationPlan {
    std::optional<ClusterSpec> cluster;
    bool measure_host = false;  // --expect-host, or --min-ratio without --cluster
    std::optional<double> min_ratio;
    bool active() const { return cluster.has_value() || measure_host; }
};
ExpectationPlan resolve_expectation(const ExpectationOptions& options);
nlohmann::json to_json(const ExpectationPlan& plan);

// The model of one run: the cluster, or the host measured now (collective over `comm`, every rank
// alike), for the group one harness measures.
class PointJudge {
  public:
    // `per_iteration`: the harness times each call after a barrier (not batched).
    PointJudge(const ExpectationPlan& plan, Communicator& comm, Device& device, const std::vector<std::string>& group_hosts,
               std::uint64_t largest_bytes, bool oversubscribed, bool per_iteration);
    bool active() const { return plan_.active(); }
    // Sets result.verdict for a measured point of `collective` (nothing for a skipped point or a
    // group of one).
    void judge(CollectiveResult& result, const Collective& collective, const CollectiveParams& params) const;
    void set_transport_note(std::string note) { context_.transport_note = std::move(note); }
    // The report's "expected_model" and the console's header line.
    nlohmann::json model_json() const;
    std::string header_line() const;

  private:
    ExpectationPlan plan_;
    GroupShape group_;
    std::optional<HostLinks> host_;
    bool per_iteration_ = true;
    VerdictContext context_;
};

// Why the run fails --min-ratio ("3 points below --min-ratio 0.5 of their expected busbw: ..."),
// or nothing.
std::optional<std::string> min_ratio_failure(const std::vector<CollectiveResult>& results,
                                             std::optional<double> min_ratio);

}  // namespace parbench

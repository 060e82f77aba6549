#include "cli/collective_expectation.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <set>
#include <sstream>

#include "bench/host_links.hpp"
#include "core/error.hpp"

namespace parbench {

void add_expectation_flags(CLI::App& sub, ExpectationOptions& options) {
    sub.add_option("--cluster", options.cluster,
                   "Expected values from this cluster's links: a cluster file (the one plan reads) or a device "
                   "preset (A100, H100, H200, B200); each point gets a ratio and a verdict");
    sub.add_flag("--expect-host", options.expect_host,
                 "Expected values from this host, measured first (shared-memory step latency, copy and reduce "
                 "bandwidth with every rank at once); CPU runs on one host");
    sub.add_option("--min-ratio", options.min_ratio,
                   "Fail the run (exit 1) when a point's busbw is below R x its expected busbw (measures the host "
                   "when no --cluster is given)");
}

ExpectationPlan resolve_expectation(const ExpectationOptions& options) {
    ExpectationPlan plan;
    if (!options.cluster.empty() && options.expect_host)
        throw UsageError("--cluster and --expect-host are two sources of expected values; give one");
    if (!options.cluster.empty()) {
        std::error_code error;
        const auto presets = device_preset_names();
        if (std::find(presets.begin(), presets.end(), options.cluster) != presets.end() &&
            !std::filesystem::exists(options.cluster, error)) {
            ClusterSpec cluster;
            cluster.device = device_preset(options.cluster);
            cluster.source = "preset " + options.cluster;
            plan.cluster = cluster;
        } else {
            plan.cluster = read_cluster_file(options.cluster);
        }
    }
    if (options.min_ratio && !(std::isfinite(*options.min_ratio) && *options.min_ratio > 0 && *options.min_ratio <= 10))
        throw UsageError("--min-ratio is a fraction of each point's expected busbw, above 0 and at most 10 (e.g. 0.5)");
    plan.min_ratio = options.min_ratio;
    plan.measure_host = options.expect_host || (options.min_ratio && !plan.cluster);
    return plan;
}

nlohmann::json to_json(const ExpectationPlan& plan) {
    return {{"cluster", plan.cluster ? nlohmann::json(plan.cluster->source) : nlohmann::json(nullptr)},
            {"expect_host", plan.measure_host},
            {"min_ratio", plan.min_ratio ? nlohmann::json(*plan.min_ratio) : nlohmann::json(nullptr)}};
}

PointJudge::PointJudge(const ExpectationPlan& plan, Communicator& comm, Device& device,
                       const std::vector<std::string>& group_hosts, std::uint64_t largest_bytes, bool oversubscribed,
                       bool per_iteration)
    : plan_(plan), per_iteration_(per_iteration) {
    context_.oversubscribed = oversubscribed;
    const std::set<std::string> hosts(group_hosts.begin(), group_hosts.end());
    group_.ranks = static_cast<int>(group_hosts.size());
    group_.hosts = static_cast<int>(hosts.size());
    for (const std::string& host : hosts)
        group_.ranks_per_host =
            std::max(group_.ranks_per_host, static_cast<int>(std::count(group_hosts.begin(), group_hosts.end(), host)));
    if (!plan_.measure_host) return;
    if (device.is_gpu())
        throw UsageError("--expect-host measures a CPU host's shared memory; on GPUs give --cluster FILE (or a preset: "
                         "A100, H100, H200, B200) with the links to expect");
    if (group_.hosts > 1)
        throw UsageError("--expect-host models one host's shared memory, and this group spans " +
                         std::to_string(group_.hosts) + " hosts: give --cluster FILE with the cross-host links");
    // A point's working set is at most its send and receive buffers: twice the largest size.
    host_ = measure_host_links(comm, device, 2 * largest_bytes);
}

void PointJudge::judge(CollectiveResult& result, const Collective& collective, const CollectiveParams& params) const {
    if (!active() || result.skipped || group_.ranks < 2 || result.reported_time_us <= 0.0) return;
    double traffic_scale = 1.0;  // a skewed alltoallv's busiest rank against the even exchange
    if (result.imbalance)
        traffic_scale = std::max(result.imbalance->received.max_over_mean(), result.imbalance->sent.max_over_mean());
    const double bytes = static_cast<double>(result.bytes);
    Expectation expected;
    if (plan_.cluster) {
        expected = expected_on_cluster(result.collective, bytes, group_, *plan_.cluster, traffic_scale);
    } else {
        // Rank 0's buffers stand for every rank's (the root's are the largest of a rooted collective).
        const BufferShape shape = collective.shape(result.count, group_.ranks, 0, params);
        const double elements = result.inplace ? static_cast<double>(shape.inplace_count)
                                               : static_cast<double>(shape.send_count + shape.recv_count);
        expected = expected_on_host(result.collective, bytes, group_.ranks,
                                    elements * static_cast<double>(dtype_size(result.dtype)), *host_, per_iteration_,
                                    traffic_scale);
    }
    result.verdict = judge_point(result.busbw_gbps, result.reported_time_us, result.warnings, expected, context_);
}

nlohmann::json PointJudge::model_json() const {
    if (!active()) return nullptr;
    nlohmann::json model = {{"group", {{"ranks", group_.ranks}, {"hosts", group_.hosts}, {"ranks_per_host", group_.ranks_per_host}}},
                            {"low_below", verdict_low_ratio},
                            {"above_from", verdict_above_ratio},
                            {"min_ratio", plan_.min_ratio ? nlohmann::json(*plan_.min_ratio) : nlohmann::json(nullptr)}};
    if (plan_.cluster) model["cluster"] = to_json(*plan_.cluster);
    if (host_) model["host"] = to_json(*host_);
    return model;
}

std::string PointJudge::header_line() const {
    std::ostringstream line;
    line << std::setprecision(3) << "# expected: ";
    if (plan_.cluster) {
        const DeviceSpec& d = plan_.cluster->device;
        line << plan_.cluster->source << ": intra-host " << d.intra_host.busbw_gbps << " GB/s, cross-host "
             << d.cross_host.busbw_gbps << " GB/s busbw, NCCL's algorithm and protocol by size";
    } else if (host_) {
        line << "this host measured (" << host_->ranks << " ranks at once): step " << host_->step_latency_us
             << " us, first step of a call " << host_->call_latency_us << " us; exchange/reduce/memcpy GB/s per rank";
        for (const HostBandwidth& b : host_->bandwidths)
            line << ' ' << static_cast<double>(b.working_set_bytes) / (1 << 20) << " MiB " << b.exchange_gbps << '/'
                 << b.reduce_gbps << '/' << b.copy_gbps;
    }
    line << "; verdict LOW below " << verdict_low_ratio << "x, ABOVE over " << verdict_above_ratio << "x";
    if (plan_.min_ratio) line << "; --min-ratio " << *plan_.min_ratio;
    return line.str();
}

std::optional<std::string> min_ratio_failure(const std::vector<CollectiveResult>& results,
                                             std::optional<double> min_ratio) {
    if (!min_ratio) return std::nullopt;
    std::size_t below = 0;
    std::ostringstream first;
    for (const CollectiveResult& r : results) {
        if (!r.verdict || r.verdict->ratio >= *min_ratio) continue;
        if (below++ == 0)
            first << std::setprecision(3) << r.collective << ' ' << r.bytes << " B " << (r.inplace ? "in-place" : "out-of-place")
                  << " reached " << r.verdict->ratio << "x (" << r.busbw_gbps << " of " << r.verdict->expected.busbw_gbps
                  << " GB/s)";
    }
    if (below == 0) return std::nullopt;
    std::ostringstream text;
    text << below << " point(s) below --min-ratio " << *min_ratio << " of their expected busbw, first " << first.str()
         << "; the verdict column says why";
    return text.str();
}

}  // namespace parbench

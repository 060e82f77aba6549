#include "train/comm_report.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "bench/host_straggler.hpp"
#include "bench/statistics.hpp"
#include "train/expected_traffic.hpp"

namespace parbench {
namespace {

double mean_of(const std::vector<double>& values) {
    if (values.empty()) return 0.0;
    return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

nlohmann::json ops_json(const CommStats& stats, double steps) {
    nlohmann::json ops = nlohmann::json::object();
    for (const auto& [op, counter] : stats.by_op)
        ops[op] = {{"calls", static_cast<double>(counter.calls) / steps},
                   {"bytes", static_cast<double>(counter.bytes) / steps},
                   {"time_ms", counter.time_ms / steps},
                   {"blocked_ms", counter.blocked_ms / steps}};
    return ops;
}

// A straggler is named when it was the slowest in at least this share of the timed steps
// (and at least this many steps) by at least this share of the median rank's compute time.
constexpr double consistent_share_of_steps = 0.75;
constexpr int consistent_min_steps = 3;
constexpr double consistent_min_margin = 0.25;

}  // namespace

nlohmann::json comm_result_json(const TrainSummaryInputs& in) {
    const TrainMeasurements& m = in.measurements;
    const double steps = static_cast<double>(in.plan.options.steps);
    const MeshCoordinates at = mesh_coordinates(in.mesh, 0);
    nlohmann::json comm = nlohmann::json::object();
    nlohmann::json time = nlohmann::json::object(), exposed = nlohmann::json::object();
    nlohmann::json bytes = nlohmann::json::object(), calls = nlohmann::json::object();
    nlohmann::json matches = nlohmann::json::object(), matches_all = nlohmann::json::object();
    for (const auto& [dimension, stats] : m.comm) {
        comm[dimension] = ops_json(stats, steps);
        time[dimension] = mean_of(m.comm_ms.at(dimension));
        exposed[dimension] = mean_of(m.exposed_ms.at(dimension));
        const auto found = m.expected_traffic.find(dimension);
        const TrafficByOp expected = found == m.expected_traffic.end() ? TrafficByOp{} : found->second;
        bytes[dimension] = nlohmann::json::object();
        calls[dimension] = nlohmann::json::object();
        for (const auto& [op, volume] : expected) {
            bytes[dimension][op] = volume.bytes;
            calls[dimension][op] = volume.calls;
        }
        matches[dimension] = traffic_matches(expected, measured_traffic(stats, in.plan.options.steps));
        matches_all[dimension] = m.expected_matches_all_ranks.at(dimension);
    }
    comm["dimensions"] = nlohmann::json::array();
    for (const auto& [dimension, stats] : m.comm) comm["dimensions"].push_back(dimension);
    comm["time_ms"] = time;
    comm["exposed_ms"] = exposed;
    comm["calls_on_groups_of_one"] = m.calls_on_groups_of_one;
    comm["reported_rank"] = {{"rank", 0}, {"dp", at.dp}, {"tp", at.tp}, {"pp", at.pp}, {"cp", at.cp}};
    comm["expected_bytes"] = bytes;
    comm["expected_calls"] = calls;
    comm["expected_matches"] = matches;
    comm["expected_matches_all_ranks"] = matches_all;
    return comm;
}

nlohmann::json straggler_json(const TrainMeasurements& m, const MeshShape& mesh) {
    const auto& compute = m.compute_ms_by_rank;
    if (compute.size() < 2 || compute.front().empty()) return nullptr;
    const std::size_t steps = compute.front().size();
    std::vector<int> slowest_count(compute.size(), 0);
    for (std::size_t k = 0; k < steps; ++k) {
        std::size_t slowest = 0;
        for (std::size_t r = 1; r < compute.size(); ++r)
            if (compute[r][k] > compute[slowest][k]) slowest = r;
        ++slowest_count[slowest];
    }
    const auto rank = static_cast<std::size_t>(std::max_element(slowest_count.begin(), slowest_count.end()) -
                                               slowest_count.begin());
    // Its excess over the median of the other ranks, per step, averaged.
    double margin_sum = 0.0, median_sum = 0.0;
    for (std::size_t k = 0; k < steps; ++k) {
        std::vector<double> others;
        for (std::size_t r = 0; r < compute.size(); ++r)
            if (r != rank) others.push_back(compute[r][k]);
        const double median = summarize(others).median;
        median_sum += median;
        margin_sum += compute[rank][k] - median;
    }
    const double margin = margin_sum / static_cast<double>(steps);
    const double median = median_sum / static_cast<double>(steps);
    const bool consistent = static_cast<int>(steps) >= consistent_min_steps &&
                            slowest_count[rank] >= consistent_share_of_steps * static_cast<double>(steps) &&
                            margin >= consistent_min_margin * median;
    nlohmann::json by_rank = nlohmann::json::array();
    for (const auto& values : compute) by_rank.push_back(mean_of(values));
    const MeshCoordinates at = mesh_coordinates(mesh, static_cast<int>(rank));
    // The host whose ranks compute the longest, by the same bar as the rank.
    HostStragglerRule host_rule;
    host_rule.min_share_of_samples = consistent_share_of_steps;
    host_rule.min_samples = consistent_min_steps;
    host_rule.min_excess_share = consistent_min_margin;
    nlohmann::json slowest_host = nullptr;
    if (const auto host = find_host_straggler(compute, m.host_of_rank, host_rule)) {
        nlohmann::json by_host = nlohmann::json::object();
        for (const auto& [name, figure] : host->median_by_host) by_host[name] = figure;
        slowest_host = {{"host", host->host},
                        {"ranks", host->ranks},
                        {"steps_slowest", host->samples_slowest},
                        {"steps", host->samples},
                        {"compute_ms", host->figure},
                        {"others_median_ms", host->others_median},
                        {"excess_ms", host->excess},
                        {"consistent", host->consistent},
                        {"compute_ms_by_host", by_host},
                        {"method", "per timed step, each host's figure is the mean over its ranks of their compute time "
                                   "outside communication; named is the host with the largest figure most often, "
                                   "compute_ms its median, others_median_ms the median of the other hosts' median "
                                   "figure, excess_ms the median excess; consistent by the rank's bar"}};
    }
    return {{"rank", rank},
            {"host", rank < m.host_of_rank.size() ? m.host_of_rank[rank] : std::string("?")},
            {"coordinates", {{"dp", at.dp}, {"tp", at.tp}, {"pp", at.pp}, {"cp", at.cp}}},
            {"steps_slowest", slowest_count[rank]},
            {"steps", steps},
            {"margin_ms", margin},
            {"median_compute_ms", median},
            {"consistent", consistent},
            {"compute_ms_by_rank", by_rank},
            {"slowest_host", slowest_host},
            {"method", "per timed step, each rank's compute time outside communication (its step time less the "
                       "time it was blocked in any group's calls); the rank the others wait for is the one with "
                       "the most; named here is the rank that was it most often, margin_ms its mean excess over "
                       "the median of the other ranks (median_compute_ms); consistent when it was the slowest in "
                       "at least 3/4 of at least 3 steps by at least 25% of that median"}};
}

std::vector<std::string> straggler_warnings(const nlohmann::json& s, const MeshShape& mesh) {
    if (s.is_null()) return {};
    std::vector<std::string> warnings;
    const auto& host = s["slowest_host"];
    if (!host.is_null() && host["consistent"].get<bool>()) {
        char text[640];
        const double others = host["others_median_ms"].get<double>();
        std::snprintf(text, sizeof text,
                      "stragglers: host %s (%d ranks) is the slowest host in %d of %d steps: its ranks' compute "
                      "outside communication is %.3g ms per step against %.3g ms on the median other host (%.2gx, "
                      "%.3g ms more)",
                      host["host"].get<std::string>().c_str(), host["ranks"].get<int>(), host["steps_slowest"].get<int>(),
                      host["steps"].get<int>(), host["compute_ms"].get<double>(), others,
                      others > 0.0 ? host["compute_ms"].get<double>() / others : 0.0, host["excess_ms"].get<double>());
        std::string warning = text;
        warning += mesh.pp > 1 ? "; pipeline stages differ in work (the last runs the head): balance them with "
                                 "--stage-layers, or look for load on that host"
                               : "; check that host for other load (top), CPU throttling or slower cores";
        warning += ", and run `parbench pairs --by host` to see whether its links are slow too";
        warnings.push_back(warning);
    }
    if (!s["consistent"].get<bool>()) return warnings;
    char text[512];
    std::snprintf(text, sizeof text,
                  "stragglers: rank %d on host %s is the one the others wait for in %d of %d steps: its compute "
                  "outside communication is %.3g ms longer than the other ranks' median (%.3g ms)",
                  s["rank"].get<int>(), s["host"].get<std::string>().c_str(), s["steps_slowest"].get<int>(),
                  s["steps"].get<int>(), s["margin_ms"].get<double>(), s["median_compute_ms"].get<double>());
    std::string warning = text;
    warning += mesh.pp > 1 ? "; pipeline stages differ in work (the last runs the head): balance them with "
                             "--stage-layers, or look for load on that host"
                           : "; look for other load on that host or core (top, taskset) or a slower device";
    warnings.push_back(warning);
    return warnings;
}

void print_comm_summary(std::ostream& out, const nlohmann::json& r) {
    const auto& comm = r["comm"];
    char line[1024];
    std::string dimensions;
    for (const auto& dimension : comm["dimensions"]) {
        const std::string d = dimension.get<std::string>();
        char part[128];
        std::snprintf(part, sizeof part, "%s%s %.3f of %.3f", dimensions.empty() ? "" : ", ",
                      (d == "tp" && r["layout"]["sp"].get<bool>()) ? "tp+sp" : d.c_str(),
                      comm["exposed_ms"][d].get<double>(), comm["time_ms"][d].get<double>());
        dimensions += part;
    }
    std::snprintf(line, sizeof line, "%-28s %.3f of %.3f per step%s%s%s\n", "exposed comm (ms)",
                  r["exposed_comm_ms"].get<double>(), r["step_time_ms"]["mean"].get<double>(),
                  dimensions.empty() ? "" : " (exposed of comm time: ", dimensions.c_str(),
                  dimensions.empty() ? "" : ")");
    out << line;
    const auto& at = comm["reported_rank"];
    if (!comm["dimensions"].empty()) {
        std::snprintf(line, sizeof line, "comm per step of rank %d (dp %d, tp %d, pp %d, cp %d): measured | expected\n",
                      at["rank"].get<int>(), at["dp"].get<int>(), at["tp"].get<int>(), at["pp"].get<int>(),
                      at["cp"].get<int>());
        out << line;
    }
    for (const auto& dimension : comm["dimensions"]) {
        const std::string d = dimension.get<std::string>();
        const auto& expected_calls = comm["expected_calls"][d];
        const auto& expected_bytes = comm["expected_bytes"][d];
        for (const auto& [op, counter] : comm[d].items()) {
            const bool known = expected_calls.contains(op);
            char expected[128];
            if (known)
                std::snprintf(expected, sizeof expected, "%g calls, %.4g MB", expected_calls[op].get<double>(),
                              expected_bytes[op].get<double>() / 1e6);
            std::snprintf(line, sizeof line, "  %-26s %g calls, %.4g MB, %.3f ms (blocked %.3f) | %s\n",
                          (d + " " + op).c_str(), counter["calls"].get<double>(), counter["bytes"].get<double>() / 1e6,
                          counter["time_ms"].get<double>(), counter["blocked_ms"].get<double>(),
                          known ? expected : "none expected");
            out << line;
        }
        for (const auto& [op, value] : expected_calls.items())
            if (!comm[d].contains(op)) {
                std::snprintf(line, sizeof line, "  %-26s none | %g calls, %.4g MB\n", (d + " " + op).c_str(),
                              value.get<double>(), expected_bytes[op].get<double>() / 1e6);
                out << line;
            }
        std::snprintf(line, sizeof line, "  %-26s %s on rank %d, %s on every rank\n", (d + " expected").c_str(),
                      comm["expected_matches"][d].get<bool>() ? "equal to the measured" : "DIFFERENT FROM the measured",
                      at["rank"].get<int>(), comm["expected_matches_all_ranks"][d].get<bool>() ? "equal" : "DIFFERENT");
        out << line;
    }
    const auto& s = r["stragglers"];
    if (!s.is_null()) {
        std::snprintf(line, sizeof line, "%-28s rank %d (%s) slowest in %d of %d steps, %.3g ms over the others' median\n",
                      "straggler (compute)", s["rank"].get<int>(), s["host"].get<std::string>().c_str(),
                      s["steps_slowest"].get<int>(), s["steps"].get<int>(), s["margin_ms"].get<double>());
        out << line;
        const auto& host = s["slowest_host"];
        if (!host.is_null()) {
            std::snprintf(line, sizeof line, "%-28s %s slowest in %d of %d steps, %.3g ms against the median other "
                          "host's %.3g ms\n", "straggler host (compute)", host["host"].get<std::string>().c_str(),
                          host["steps_slowest"].get<int>(), host["steps"].get<int>(), host["compute_ms"].get<double>(),
                          host["others_median_ms"].get<double>());
            out << line;
        }
    }
}

}  // namespace parbench

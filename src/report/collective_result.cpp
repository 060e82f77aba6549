#include "report/collective_result.hpp"

#include <algorithm>
#include <iomanip>
#include <set>
#include <sstream>
#include <tuple>

namespace parbench {
namespace {

nlohmann::json optional_number(const std::optional<double>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json straggler_json(const StragglerFinding& finding) {
    return {{"rank", finding.rank},
            {"host", finding.host},
            {"fraction_last", finding.fraction},
            {"wait_us", finding.wait_us},
            {"consistent", finding.consistent},
            {"waited_host", finding.waited_host},
            {"host_fraction_last", finding.host_fraction},
            {"host_lateness_us", finding.host_lateness_us},
            {"host_consistent", finding.host_consistent}};
}

}  // namespace

void derive_statistics(CollectiveResult& result, const RankTimes& times, const std::vector<std::string>& hosts_by_rank) {
    result.samples_us = aggregate_samples(times, result.aggregation);
    result.time_us = summarize(result.samples_us);
    result.reported_time_us = reported_time(times, result.aggregation);
    result.aggregates = every_aggregation(times);
    result.per_rank.clear();
    for (const RankSummary& rank : per_rank_summaries(times)) {
        const auto index = static_cast<std::size_t>(rank.rank);
        result.per_rank.push_back(
            {rank.rank, index < hosts_by_rank.size() ? hosts_by_rank[index] : "", rank.median_us, rank.mean_us});
    }
    result.full = full_statistics(times, result.samples_us);
    result.straggler = find_straggler(times, hosts_by_rank, result.reported_time_us);
    result.outliers = count_outliers(result.samples_us);
    result.warnings = sample_warning_list(result.samples_us);
    if (result.straggler && result.straggler->consistent) {
        std::ostringstream text;
        text << std::fixed;
        text.precision(1);
        text << "rank " << result.straggler->rank << " (host " << result.straggler->host << ") arrived last in "
             << 100.0 * result.straggler->fraction << "% of iterations; the others waited "
             << result.straggler->wait_us << " us for it (median)";
        result.warnings.push_back({"straggler", text.str()});
    }
    // bytes per microsecond is MB/s; /1e3 gives decimal GB/s, as nccl-tests reports.
    result.algbw_gbps =
        result.reported_time_us > 0.0 ? static_cast<double>(result.bytes) / result.reported_time_us / 1e3 : 0.0;
    result.busbw_gbps = result.algbw_gbps * result.bus_factor;
}

void add_thread_counters(CollectiveResult& result, std::vector<ThreadCounters> by_rank, std::uint64_t calls_per_rank) {
    for (Warning& warning : thread_counter_warnings(by_rank, calls_per_rank, "call"))
        result.warnings.push_back(std::move(warning));
    result.counters_by_rank = std::move(by_rank);
    result.counted_calls = calls_per_rank;
}

nlohmann::json to_json(const CollectiveResult& result) {
    nlohmann::json entry = {
        {"collective", result.collective},
        {"bytes", result.bytes},
        {"requested_bytes", result.requested_bytes},
        {"count", result.count},
        {"dtype", dtype_name(result.dtype)},
        {"op", result.op ? nlohmann::json(reduce_op_name(*result.op)) : nlohmann::json(nullptr)},
        {"root", result.root ? nlohmann::json(*result.root) : nlohmann::json(nullptr)},
        {"inplace", result.inplace},
        {"placement", result.inplace ? "in" : "out"},
    };
    if (result.repetition) entry["repetition"] = *result.repetition;
    if (result.placement_note) entry["placement_note"] = *result.placement_note;
    if (result.one_rank_shortcut) entry["one_rank_shortcut"] = *result.one_rank_shortcut;
    if (result.skew)
        entry["skew"] = {{"distribution", result.skew->distribution},
                         {"seed", result.skew->seed},
                         {"direction", result.skew->direction}};
    if (result.skipped) {
        entry["skipped"] = *result.skipped;
        return entry;
    }
    entry["aggregation"] = aggregation_name(result.aggregation);
    entry["reported_statistic"] = reported_statistic(result.aggregation);
    entry["reported_time_us"] = result.reported_time_us;
    entry["time_us"] = {
        {"mean", result.time_us.mean},     {"median", result.time_us.median}, {"min", result.time_us.min},
        {"max", result.time_us.max},       {"p95", result.time_us.p95},
        {"stddev", optional_number(result.time_us.stddev)},
    };
    entry["samples_us"] = result.samples_us;
    nlohmann::json aggregates = nlohmann::json::object();
    for (const AggregateTime& a : result.aggregates) aggregates[std::string(aggregation_name(a.aggregation))] = a.time_us;
    entry["aggregates_us"] = aggregates;
    nlohmann::json per_rank = nlohmann::json::array();
    for (const RankFigures& r : result.per_rank)
        per_rank.push_back({{"rank", r.rank}, {"host", r.host}, {"median_us", r.median_us}, {"mean_us", r.mean_us}});
    entry["per_rank"] = per_rank;
    const auto of_rank = [](const TimeOfRank& t) { return nlohmann::json{{"time_us", t.time_us}, {"rank", t.rank}}; };
    entry["full_statistics"] = {{"fastest_rank_mean", of_rank(result.full.fastest_rank)},
                                {"slowest_rank_mean", of_rank(result.full.slowest_rank)},
                                {"p95", of_rank(result.full.p95)},
                                {"p95_iteration", result.full.p95_iteration}};
    entry["straggler"] = result.straggler ? straggler_json(*result.straggler) : nlohmann::json(nullptr);
    entry["bus_factor"] = result.bus_factor;
    entry["algbw_gbps"] = result.algbw_gbps;
    entry["busbw_gbps"] = result.busbw_gbps;
    if (result.imbalance) {
        const auto side = [](const TrafficImbalance::Side& s) {
            return nlohmann::json{{"max_bytes", s.max_bytes}, {"mean_bytes", s.mean_bytes},
                                  {"max_over_mean", s.max_over_mean()}, {"max_rank", s.max_rank}};
        };
        entry["imbalance"] = {{"sent", side(result.imbalance->sent)}, {"received", side(result.imbalance->received)}};
    }
    entry["wrong"] = result.wrong ? nlohmann::json(*result.wrong) : nlohmann::json(nullptr);
    entry["outliers"] = result.outliers;
    entry["thread_counters"] =
        result.counters_by_rank.empty()
            ? nlohmann::json(nullptr)
            : thread_counters_json(result.counters_by_rank, result.counted_calls,
                                   "the timed iterations, with their barriers; calls = ops per rank in them");
    nlohmann::json warnings = nlohmann::json::array();
    nlohmann::json kinds = nlohmann::json::array();
    for (const Warning& w : result.warnings) {
        warnings.push_back(w.text);
        kinds.push_back(w.kind);
    }
    entry["warnings"] = warnings;
    if (!result.groups.is_null()) entry["groups"] = result.groups;
    if (result.verdict) entry.update(to_json(*result.verdict));
    if (result.extra.is_object()) entry.update(result.extra);
    entry["warning_kinds"] = kinds;
    return entry;
}

RunSummary summarize_run(const std::vector<CollectiveResult>& results, bool checked) {
    RunSummary summary;
    summary.checked = checked;
    double busbw_total = 0.0;
    std::vector<StragglerFinding> findings;
    std::set<std::uint64_t> sizes;  // as asked for: the same for every collective
    std::set<std::string> collectives;
    // (collective, type, op, root): several per collective under -d/-o/-r all
    std::set<std::tuple<std::string, DType, std::optional<ReduceOp>, std::optional<int>>> cases;
    std::set<bool> placements;
    std::set<int> sweeps;
    for (const CollectiveResult& r : results) {
        if (r.skipped) continue;
        ++summary.measured_points;
        sizes.insert(r.requested_bytes);
        collectives.insert(r.collective);
        cases.insert({r.collective, r.dtype, r.op, r.root});
        placements.insert(r.inplace);
        sweeps.insert(r.repetition.value_or(1));
        if (!r.warnings.empty()) ++summary.warned_points;
        busbw_total += r.busbw_gbps;
        if (r.wrong) summary.wrong_total += *r.wrong;
        if (!summary.peak || r.busbw_gbps > summary.peak->busbw_gbps)
            summary.peak = RunSummary::Peak{r.busbw_gbps, r.collective, r.bytes, r.inplace};
        std::set<std::string> kinds;
        for (const Warning& w : r.warnings) kinds.insert(w.kind);
        for (const std::string& kind : kinds) ++summary.warning_points[kind];
        if (r.straggler) findings.push_back(*r.straggler);
    }
    summary.measured_sizes = sizes.size();
    summary.measured_collectives = collectives.size();
    std::map<std::string, std::size_t> cases_per_collective;
    for (const auto& entry : cases) ++cases_per_collective[std::get<0>(entry)];
    for (const auto& [name, count] : cases_per_collective) summary.measured_cases = std::max(summary.measured_cases, count);
    summary.both_placements = placements.size() == 2;
    summary.measured_sweeps = std::max<std::size_t>(sweeps.size(), 1);
    if (summary.measured_points > 0) summary.average_busbw_gbps = busbw_total / static_cast<double>(summary.measured_points);
    summary.straggler_warning = run_straggler_warning(findings);
    return summary;
}

std::optional<std::string> busbw_gate_failure(const RunSummary& summary, const std::optional<BusbwGate>& gate) {
    if (!gate) return std::nullopt;
    std::ostringstream text;
    text << std::fixed << std::setprecision(2);
    if (!summary.average_busbw_gbps) {
        text << "no point was measured, so the run cannot show the " << gate->gbps << " GB/s average busbw that "
             << gate->source << " asks for";
        return text.str();
    }
    if (*summary.average_busbw_gbps >= gate->gbps) return std::nullopt;
    text << "average busbw " << *summary.average_busbw_gbps << " GB/s is below " << gate->gbps << " GB/s ("
         << gate->source << "); the run fails its bandwidth gate";
    return text.str();
}

nlohmann::json to_json(const RunSummary& summary) {
    nlohmann::json peak = nullptr;
    if (summary.peak)
        peak = {{"busbw_gbps", summary.peak->busbw_gbps},
                {"collective", summary.peak->collective},
                {"bytes", summary.peak->bytes},
                {"placement", summary.peak->inplace ? "in" : "out"}};
    return {
        {"measured_points", summary.measured_points},
        {"checked", summary.checked},
        {"wrong_total", summary.checked ? nlohmann::json(summary.wrong_total) : nlohmann::json(nullptr)},
        {"status", !summary.checked ? "not checked" : summary.wrong_total == 0 ? "OK" : "FAILED"},
        {"average_busbw_gbps", optional_number(summary.average_busbw_gbps)},
        {"average_over", "measured points (every size and placement), not a peak"},
        {"peak", peak},
        {"warning_points", summary.warning_points},
        {"straggler_warning",
         summary.straggler_warning ? nlohmann::json(*summary.straggler_warning) : nlohmann::json(nullptr)},
    };
}

}  // namespace parbench

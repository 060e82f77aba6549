#include "report/inspector_compare.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/error.hpp"

namespace parbench {
namespace {

std::uint64_t bucket_of(std::uint64_t bytes) { return bytes == 0 ? 0 : std::bit_floor(bytes); }

template <typename T>
T median_of(std::vector<T> values) {
    std::sort(values.begin(), values.end());
    const std::size_t half = values.size() / 2;
    if (values.size() % 2 == 1) return values[half];
    return static_cast<T>((values[half - 1] + values[half]) / 2);
}

struct BenchPoint {
    std::uint64_t bytes = 0;
    double busbw_gbps = 0.0;
    std::string report;
    int hosts = 0;
};

int world_size_of(const nlohmann::json& document) {
    const nlohmann::json environment = document.value("environment", nlohmann::json::object());
    return environment.is_object() && environment.contains("world_size") && environment["world_size"].is_number_integer()
               ? environment["world_size"].get<int>()
               : 0;
}

int hosts_of(const nlohmann::json& document) {
    const nlohmann::json environment = document.value("environment", nlohmann::json::object());
    return environment.is_object() && environment.contains("hosts") && environment["hosts"].is_array()
               ? static_cast<int>(environment["hosts"].size())
               : 0;
}

// The report point nearest `bytes` (log scale) in its bucket, for `collective` on `ranks` ranks;
// the out-of-place half where the report has both. The first report holding one wins.
std::optional<BenchPoint> benchmark_point(const std::vector<LabelledReport>& reports, const std::string& collective,
                                          int ranks, std::uint64_t bytes) {
    for (const LabelledReport& report : reports) {
        if (world_size_of(report.document) != ranks) continue;
        std::optional<BenchPoint> best;
        double best_distance = 0.0;
        bool best_in_place = true;
        for (const nlohmann::json& entry : report.document["results"]) {
            if (entry.contains("skipped") || entry.value("collective", "") != collective) continue;
            const auto point_bytes = entry["bytes"].get<std::uint64_t>();
            if (point_bytes == 0 || bucket_of(point_bytes) != bucket_of(bytes)) continue;
            const double distance = std::abs(std::log2(static_cast<double>(point_bytes) / static_cast<double>(bytes)));
            const bool in_place = entry["inplace"].get<bool>();
            if (best && (distance > best_distance || (distance == best_distance && in_place && !best_in_place)))
                continue;
            best = BenchPoint{point_bytes, entry["busbw_gbps"].get<double>(), report.label, hosts_of(report.document)};
            best_distance = distance;
            best_in_place = in_place;
        }
        if (best) return best;
    }
    return std::nullopt;
}

std::string fixed(double value, int digits = 2) {
    std::ostringstream text;
    text << std::fixed << std::setprecision(digits) << value;
    return text.str();
}

void judge(InJobRow& row, const InJobBounds& bounds) {
    if (!row.bench_busbw_gbps) {
        row.verdict = "no benchmark point";
        row.note = "no report holds " + row.collective + " on " + std::to_string(row.n_ranks) + " ranks in this bucket";
        return;
    }
    if (*row.bench_busbw_gbps <= 0.0) {
        row.verdict = "no benchmark point";
        row.note = "the benchmark point has no bandwidth";
        return;
    }
    row.ratio = row.job_busbw_gbps / *row.bench_busbw_gbps;
    if (*row.ratio < bounds.low) {
        row.verdict = "LOW";
        row.note = "the job reaches " + fixed(*row.ratio) + "x of what the same group reaches alone: contention "
                   "(other communicators, compute overlap), or another algorithm/transport in the job";
    } else if (*row.ratio > bounds.high) {
        row.verdict = "above benchmark";
        row.note = "the job is faster than the benchmark: the benchmark's setup (placement, hosts, NCCL settings) "
                   "is not the job's";
    } else {
        row.verdict = "ok";
    }
    if (row.bench_hosts > 0 && row.bench_hosts != row.nnodes) {
        row.note += std::string(row.note.empty() ? "" : "; ") + "the job ran on " + std::to_string(row.nnodes) +
                    " node(s), the benchmark on " + std::to_string(row.bench_hosts) + " host(s)";
    }
}

}  // namespace

InJobComparison compare_in_job(const std::vector<InspectorRecord>& records, const std::vector<LabelledReport>& reports,
                               const InJobBounds& bounds) {
    for (const LabelledReport& report : reports) check_collective_report(report);
    InJobComparison comparison;
    comparison.bounds = bounds;
    comparison.records = records.size();
    using Key = std::tuple<std::string, std::uint64_t, int, int>;  // collective, bucket, n_ranks, nnodes
    std::map<Key, std::vector<const InspectorRecord*>> groups;
    for (const InspectorRecord& record : records) {
        if (record.exec_time_us <= 0.0) {
            ++comparison.untimed_records;
            continue;
        }
        groups[{record.collective, bucket_of(record.bytes), record.n_ranks, record.nnodes}].push_back(&record);
    }
    if (groups.empty())
        throw UsageError("the NCCL Inspector logs hold no timed collective record (" + std::to_string(records.size()) +
                         " records, " + std::to_string(comparison.untimed_records) +
                         " with coll_exec_time_us 0); give logs of a job that ran collectives");
    for (const auto& [key, members] : groups) {
        InJobRow row;
        std::tie(row.collective, row.bucket_bytes, row.n_ranks, row.nnodes) = key;
        row.records = members.size();
        std::set<std::pair<std::string, std::uint64_t>> operations;
        std::set<std::string> hosts;
        std::vector<double> busbw, time;
        std::vector<std::uint64_t> bytes;
        for (const InspectorRecord* record : members) {
            operations.emplace(record->communicator, record->sequence);
            if (!record->host.empty()) hosts.insert(record->host);
            busbw.push_back(record->busbw_gbps);
            time.push_back(record->exec_time_us);
            bytes.push_back(record->bytes);
        }
        row.operations = operations.size();
        row.hosts = hosts.size();
        row.job_busbw_gbps = median_of(busbw);
        row.job_busbw_min_gbps = *std::min_element(busbw.begin(), busbw.end());
        row.job_time_us = median_of(time);
        row.job_bytes = median_of(bytes);
        if (const auto point = benchmark_point(reports, row.collective, row.n_ranks, row.job_bytes)) {
            row.bench_busbw_gbps = point->busbw_gbps;
            row.bench_bytes = point->bytes;
            row.bench_report = point->report;
            row.bench_hosts = point->hosts;
        }
        judge(row, bounds);
        comparison.rows.push_back(std::move(row));
    }
    return comparison;
}

std::string render(const InJobComparison& comparison, CompareFormat format) {
    TableRows rows{{"collective", "size bucket (B)", "ranks", "nodes", "records", "job bytes (median)",
                    "job busbw GB/s (median)", "job busbw min", "benchmark bytes", "benchmark busbw GB/s", "ratio",
                    "verdict", "report", "note"}};
    for (const InJobRow& row : comparison.rows) {
        rows.push_back({row.collective, std::to_string(row.bucket_bytes), std::to_string(row.n_ranks),
                        std::to_string(row.nnodes), std::to_string(row.records), std::to_string(row.job_bytes),
                        fixed(row.job_busbw_gbps), fixed(row.job_busbw_min_gbps),
                        row.bench_busbw_gbps ? std::to_string(row.bench_bytes) : "-",
                        row.bench_busbw_gbps ? fixed(*row.bench_busbw_gbps) : "-", row.ratio ? fixed(*row.ratio) : "-",
                        row.verdict, row.bench_report.empty() ? "-" : row.bench_report,
                        row.note.empty() ? "-" : row.note});
    }
    std::ostringstream out;
    if (format == CompareFormat::console)
        out << "# in-job (NCCL Inspector, " << comparison.records << " records) against the benchmark: LOW below "
            << fixed(comparison.bounds.low) << "x of the benchmark's busbw\n";
    out << render_table(rows, format, 4);
    return out.str();
}

}  // namespace parbench

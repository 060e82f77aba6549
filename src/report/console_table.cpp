#include "report/console_table.hpp"

#include <algorithm>
#include <iomanip>

#include "report/environment.hpp"

namespace parbench {
namespace {

constexpr int half_width = 36;  // time, algbw, busbw, #wrong
constexpr int verdict_width = 13;  // ratio, verdict
// --full: the fastest and slowest rank's mean and the p95 sample, each with its rank.
constexpr int full_time_width = 10;
constexpr int full_rank_width = 5;
constexpr int full_width = 3 * (full_time_width + full_rank_width);

int width_of_half(const Placements& columns) {
    return half_width + (columns.verdicts ? verdict_width : 0) + (columns.full ? full_width : 0);
}

void print_half(std::ostream& out, const CollectiveResult* result, const Placements& columns) {
    if (result == nullptr || result->skipped) {
        out << std::setw(width_of_half(columns)) << "skipped";
        return;
    }
    const auto flags = out.flags();
    out << std::fixed << std::setprecision(2) << std::setw(11) << result->reported_time_us << std::setw(9)
        << result->algbw_gbps << std::setw(9) << result->busbw_gbps;
    out.flags(flags);
    out << std::setw(7) << (result->wrong ? std::to_string(*result->wrong) : "N/A");
    if (columns.full) {
        out << std::fixed << std::setprecision(2);
        for (const TimeOfRank& t : {result->full.fastest_rank, result->full.slowest_rank, result->full.p95})
            out << std::setw(full_time_width) << t.time_us << std::setw(full_rank_width) << t.rank;
        out.flags(flags);
    }
    if (!columns.verdicts) return;
    if (!result->verdict) {
        out << std::setw(verdict_width) << "-";
        return;
    }
    out << std::fixed << std::setprecision(2) << std::setw(7) << result->verdict->ratio << std::setw(6)
        << result->verdict->verdict;
    out.flags(flags);
}

}  // namespace

void print_console_header(std::ostream& out, const nlohmann::json& frame, const std::string& method) {
    const nlohmann::json& environment = frame.at("environment");
    out << "# parbench " << frame["tool"]["version"].get<std::string>() << " (" << frame["tool"]["git"].get<std::string>()
        << "): " << frame["command"].get<std::string>() << '\n';
    out << "# ranks " << environment["world_size"].get<int>() << " on " << environment["hosts"].size() << " host(s):";
    for (const auto& [host, ranks] : environment["ranks_per_host"].items()) out << ' ' << host << " x" << ranks.get<int>();
    out << "; " << environment["cpu_cores"].get<unsigned>() << " cores on this host\n";
    out << "# backend " << environment["backend"].get<std::string>() << ", device "
        << environment["device_kind"].get<std::string>() << ": " << environment["device"].get<std::string>() << '\n';
    if (environment.contains("buffer_pages")) out << buffer_pages_line(environment["buffer_pages"]) << '\n';
    out << "# " << environment["mpi_version"].get<std::string>();
    for (const auto& [library, version] : environment["versions"].items()) out << ", " << library << ' ' << version.get<std::string>();
    const nlohmann::json& config = frame.at("config");
    if (config.contains("mpi_threads"))
        out << "; MPI thread level " << config["mpi_threads"]["provided"].get<std::string>() << " (requested "
            << config["mpi_threads"]["requested"].get<std::string>() << ")";
    out << '\n';
    out << "# method: " << method << '\n';
    if (config.contains("check")) {
        // nccl-tests' -c N checks N runs per size; -c 0 is --no-check.
        const int runs = config.value("check_runs", config["check"].get<bool>() ? 1 : 0);
        out << "# validation: ";
        if (runs == 0)
            out << "off (-c 0 / --no-check): #wrong is N/A\n";
        else
            out << (runs == 1 ? std::string("one checked run") : std::to_string(runs) + " checked runs")
                << " per size after timing (-c 0 or --no-check skips " << (runs == 1 ? "it" : "them") << ")\n";
    }
}

void print_console_columns(std::ostream& out, const std::string& collective, Placements placements,
                           std::string_view time_statistic) {
    const int halves = (placements.out_of_place ? 1 : 0) + (placements.in_place ? 1 : 0);
    out << "#\n# " << collective << '\n';
    if (placements.full)
        out << "# --full: t_min / t_max: the fastest / slowest rank's mean time (OSU's Min / Max Latency) and that "
               "rank; p95: the 95th-percentile sample and the rank slowest in it\n";
    out << "# " << std::setw(49) << "";
    if (placements.out_of_place) out << std::setw(width_of_half(placements)) << "out-of-place";
    if (placements.in_place) out << std::setw(width_of_half(placements)) << "in-place";
    out << '\n';
    out << "# " << std::setw(12) << "size" << std::setw(12) << "count" << std::setw(10) << "type" << std::setw(8)
        << "redop" << std::setw(7) << "root";
    // The time column names its statistic: IMB's labels for the rank means.
    const char* time_label = time_statistic == "median"               ? "time_med"
                             : time_statistic == "mean of rank means" ? "t_avg"
                             : time_statistic == "min of rank means"  ? "t_min"
                                                                      : "t_max";
    for (int h = 0; h < halves; ++h) {
        out << std::setw(11) << time_label << std::setw(9) << "algbw" << std::setw(9) << "busbw" << std::setw(7)
            << "#wrong";
        if (placements.full)
            for (const char* label : {"t_min", "t_max", "p95"})
                out << std::setw(full_time_width) << label << std::setw(full_rank_width) << "rank";
        if (placements.verdicts) out << std::setw(7) << "ratio" << std::setw(6) << "vs";
    }
    out << '\n';
    out << "# " << std::setw(12) << "(B)" << std::setw(12) << "(elements)" << std::setw(25) << "";
    for (int h = 0; h < halves; ++h) {
        out << std::setw(11) << "(us)" << std::setw(9) << "(GB/s)" << std::setw(9) << "(GB/s)" << std::setw(7) << "";
        if (placements.full)
            for (int column = 0; column < 3; ++column)
                out << std::setw(full_time_width) << "(us)" << std::setw(full_rank_width) << "";
        if (placements.verdicts) out << std::setw(7) << "(x exp)" << std::setw(6) << "model";
    }
    out << '\n';
}

void print_console_row(std::ostream& out, Placements placements, const CollectiveResult* out_of_place,
                       const CollectiveResult* in_place) {
    const CollectiveResult& any = out_of_place != nullptr ? *out_of_place : *in_place;
    // A skipped point has no measured size: show the one asked for.
    const bool measured = any.count > 0;
    out << "  " << std::setw(12) << (measured ? any.bytes : any.requested_bytes) << std::setw(12) << any.count
        << std::setw(10) << dtype_name(any.dtype) << std::setw(8)
        << (any.op ? std::string(reduce_op_name(*any.op)) : "none") << std::setw(7)
        << (any.root ? std::to_string(*any.root) : "-");
    if (placements.out_of_place) print_half(out, out_of_place, placements);
    if (placements.in_place) print_half(out, in_place, placements);
    for (const CollectiveResult* half : {out_of_place, in_place})
        if (half != nullptr && half->skipped)
            out << "  (" << (half->inplace ? "in-place" : "out-of-place") << " skipped: " << *half->skipped << ')';
    out << '\n';
    // What a verdict other than ok points to, and the expected figure it was judged against.
    for (const CollectiveResult* half : {out_of_place, in_place})
        if (half != nullptr && half->verdict && half->verdict->verdict != "ok") {
            const auto flags = out.flags();
            out << std::fixed << std::setprecision(2) << "#   " << (half->inplace ? "in-place" : "out-of-place") << ' '
                << half->verdict->verdict << ": expected " << half->verdict->expected.busbw_gbps << " GB/s busbw ("
                << half->verdict->expected.algorithm
                << (half->verdict->expected.protocol.empty() ? "" : "/" + half->verdict->expected.protocol) << ", "
                << half->verdict->expected.time_us << " us); " << half->verdict->cause << '\n';
            out.flags(flags);
        }
    // Uneven traffic (alltoallv): the halves share their blocks, so one line tells both.
    for (const CollectiveResult* half : {out_of_place, in_place})
        if (half != nullptr && half->imbalance) {
            const TrafficImbalance& imbalance = *half->imbalance;
            const auto flags = out.flags();
            out << std::fixed << std::setprecision(2) << "#   per rank max/mean: received "
                << imbalance.received.max_over_mean() << " (rank " << imbalance.received.max_rank << ", "
                << imbalance.received.max_bytes << " B), sent " << imbalance.sent.max_over_mean() << '\n';
            out.flags(flags);
            break;
        }
}

std::string average_scope(const RunSummary& summary) {
    const auto counted = [](std::size_t n, const char* one, const char* many) {
        return std::to_string(n) + ' ' + (n == 1 ? one : many);
    };
    if (summary.measured_points == summary.measured_sizes && summary.measured_collectives <= 1 &&
        summary.measured_sweeps <= 1)
        return "the " + counted(summary.measured_sizes, "measured size", "measured sizes");
    std::string parts;
    if (summary.measured_collectives > 1) parts = counted(summary.measured_collectives, "collective", "collectives") + ", ";
    if (summary.measured_cases > 1) parts += counted(summary.measured_cases, "type/op/root case", "type/op/root cases") + ", ";
    parts += counted(summary.measured_sizes, "size", "sizes");
    if (summary.both_placements) parts += ", out of place and in place";
    if (summary.measured_sweeps > 1) parts += ", " + counted(summary.measured_sweeps, "sweep", "sweeps");
    return "the " + counted(summary.measured_points, "measured point", "measured points") + " (" + parts + ")";
}

std::optional<std::string> warning_tally(const RunSummary& summary) {
    if (summary.warning_points.empty()) return std::nullopt;
    std::string kinds;
    for (const auto& [kind, points] : summary.warning_points) {
        std::string words = kind;  // "slow-first-sample" -> "slow first sample"
        std::replace(words.begin(), words.end(), '-', ' ');
        kinds += (kinds.empty() ? "" : ", ") + words + " (" + std::to_string(points) + ")";
    }
    // "of N points": the count is of the N, as in "1 of 1 points warned".
    return std::to_string(summary.warned_points) + " of " + std::to_string(summary.measured_points) +
           " points warned: " + kinds;
}

void print_console_summary(std::ostream& out, const RunSummary& summary, std::optional<double> min_busbw_gbps) {
    out << "#\n# wrong elements: ";
    if (!summary.checked)
        out << "not checked (-c 0 / --no-check)\n";
    else
        out << summary.wrong_total << (summary.wrong_total == 0 ? " OK" : " FAILED") << '\n';
    const auto flags = out.flags();
    const auto precision = out.precision();
    out << std::fixed << std::setprecision(2);
    if (summary.average_busbw_gbps)
        out << "# average busbw: " << *summary.average_busbw_gbps << " GB/s (mean over " << average_scope(summary)
            << "; an average, not a peak)\n";
    if (summary.peak)
        out << "# peak busbw: " << summary.peak->busbw_gbps << " GB/s (" << summary.peak->collective << ' '
            << summary.peak->bytes << " B " << (summary.peak->inplace ? "in-place" : "out-of-place") << ")\n";
    out.flags(flags);
    // nccl-tests' closing lines, in its layout (name left-aligned in 20 columns, %g), so that
    // scripts written for its logs read these too. Unchecked data has no count: N/A, not 0.
    out << "# Out of bounds values : ";
    if (summary.checked)
        out << summary.wrong_total << (summary.wrong_total == 0 ? " OK" : " FAILED") << '\n';
    else
        out << "N/A (-c 0 / --no-check)\n";
    out << "# Avg bus bandwidth    : ";
    if (summary.average_busbw_gbps) {
        out << std::defaultfloat << std::setprecision(6) << *summary.average_busbw_gbps;
        if (min_busbw_gbps) out << (*summary.average_busbw_gbps >= *min_busbw_gbps ? " OK" : " FAILED");
    } else {
        out << "N/A (no point measured)";
    }
    out << '\n';
    out.flags(flags);
    out.precision(precision);
}

}  // namespace parbench

#include "plan/alpha_beta.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "theory/bus_factor.hpp"

namespace parbench {
namespace {

struct Point {
    double bytes = 0.0;
    double time_us = 0.0;
};

// The median time of one point, wherever the report keeps it: `time_us.median` (today), or
// inside an out-of-place half (`out_of_place`, `out`, `outofplace`) or an in-place one.
std::optional<double> median_time(const nlohmann::json& point) {
    auto from = [](const nlohmann::json& object) -> std::optional<double> {
        if (object.is_object() && object.contains("time_us") && object["time_us"].is_object() &&
            object["time_us"].contains("median") && object["time_us"]["median"].is_number())
            return object["time_us"]["median"].get<double>();
        return std::nullopt;
    };
    for (const char* half : {"out_of_place", "outofplace", "out", "in_place", "inplace", "in"})
        if (point.contains(half))
            if (auto time = from(point[half])) return time;
    return from(point);
}

std::string group_placement(const nlohmann::json& report) {
    const nlohmann::json config = report.value("config", nlohmann::json::object());
    if (config.contains("groups") && config["groups"].is_string()) {
        const std::string groups = config["groups"];
        if (groups == "cross-host") return "cross_host";
        if (groups == "host") return "intra_host";
    }
    const nlohmann::json env = report.value("environment", nlohmann::json::object());
    if (env.contains("hosts") && env["hosts"].is_array() && env["hosts"].size() > 1) return "cross_host";
    return "intra_host";
}

// Weighted least squares of t = a + b·x with weights 1/t² (relative error); nullopt when the
// time does not grow with x (no positive slope fits).
struct Line {
    double alpha = 0.0, beta = 0.0;
};
std::optional<Line> fit_line(const std::vector<Point>& points) {
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const Point& p : points) {
        const double w = 1.0 / (p.time_us * p.time_us);
        sw += w;
        sx += w * p.bytes;
        sy += w * p.time_us;
        sxx += w * p.bytes * p.bytes;
        sxy += w * p.bytes * p.time_us;
    }
    const double det = sw * sxx - sx * sx;
    double slope = det != 0 ? (sw * sxy - sx * sy) / det : 0.0;
    double intercept = (sy - slope * sx) / sw;
    if (intercept < 0) {  // a negative latency means the line is pulled by large sizes: pin it at 0
        intercept = 0;
        slope = sxy / sxx;
    }
    if (!(slope > 0) || !std::isfinite(slope) || !std::isfinite(intercept)) return std::nullopt;
    return Line{intercept, slope};
}

// "8 B: 12.1 us" for a fitted point (its bytes in nccl-tests' size, not the bus-factor-scaled x).
std::string point_text(const Point& p, double factor) {
    char text[96];
    std::snprintf(text, sizeof text, "%.0f B: %.4g us", p.bytes / factor, p.time_us);
    return text;
}

}  // namespace

std::string placement_name(Placement placement) {
    return placement == Placement::intra_host ? "intra_host" : "cross_host";
}

namespace {
constexpr const char* averaged_suffix = " avg";
constexpr const char* nonblocking_suffix = " nonblocking";

bool ends_with(const std::string& name, const std::string& suffix) {
    return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The name without its last form suffix (" nonblocking", else " avg"): what find falls back to.
std::string blocking_or_summed(const std::string& collective) {
    for (const std::string suffix : {nonblocking_suffix, averaged_suffix})
        if (ends_with(collective, suffix)) return collective.substr(0, collective.size() - suffix.size());
    return collective;
}

// The collective itself, without either suffix.
std::string base_collective(const std::string& collective) {
    const std::string shorter = blocking_or_summed(collective);
    return shorter == collective ? collective : base_collective(shorter);
}

// How a fit's name says its sweep ran, for its source.
std::string sweep_flags(const std::string& collective) {
    std::string flags;
    if (collective.find(averaged_suffix) != std::string::npos) flags += " --op avg";
    if (ends_with(collective, nonblocking_suffix)) flags += " --nonblocking";
    return flags.empty() ? "" : " (" + flags.substr(1) + ")";
}
}  // namespace

std::string averaged_collective(const std::string& collective) { return collective + averaged_suffix; }

std::string nonblocking_collective(const std::string& collective) { return collective + nonblocking_suffix; }

double bus_factor(const std::string& name, int n) { return collective_bus_factor(base_collective(name), n); }

CommModel::CommModel(const ClusterSpec& cluster) : cluster_(cluster) {}

void CommModel::add_fit(const CollectiveFit& fit) {
    for (CollectiveFit& existing : fits_)
        if (existing.collective == fit.collective && existing.placement == fit.placement) {
            existing = fit;
            return;
        }
    fits_.push_back(fit);
}

const CollectiveFit* CommModel::find(const std::string& collective, Placement placement) const {
    for (const CollectiveFit& fit : fits_)
        if (fit.collective == collective && fit.placement == placement) return &fit;
    // A non-blocking call without its own sweep costs what the blocking one does (as plan priced
    // it before --nonblocking); an average without its own, what its sum does (NCCL's, and any
    // backend whose reduction averages as it goes).
    if (blocking_or_summed(collective) != collective) return find(blocking_or_summed(collective), placement);
    // A cross-host group with only an intra-host fit (or the reverse) falls back to the preset.
    return nullptr;
}

namespace {
// The measured medians' time at x (bytes x bus factor), linear between the two sizes around it;
// nullopt outside the swept range, where the fitted line answers.
std::optional<double> interpolated_us(const CollectiveFit& fit, double x) {
    const auto& points = fit.measured;
    if (points.size() < 2 || x < points.front().first || x > points.back().first) return std::nullopt;
    const auto above = std::lower_bound(points.begin(), points.end(), x,
                                        [](const std::pair<double, double>& p, double value) { return p.first < value; });
    if (above->first == x) return above->second;
    const auto below = std::prev(above);
    const double t = (x - below->first) / (above->first - below->first);
    return below->second + t * (above->second - below->second);
}
}  // namespace

double CommModel::time_us(const std::string& collective, double bytes, int ranks, Placement placement,
                          int members_per_host) const {
    if (ranks <= 1) return 0.0;
    const double factor = bus_factor(collective, ranks);
    if (const CollectiveFit* fit = find(collective, placement)) {
        if (const auto measured = interpolated_us(*fit, bytes * factor)) return *measured;
        return fit->alpha_us + bytes * factor / (fit->busbw_gbps * 1e3);
    }
    const LinkModel& link = placement == Placement::intra_host ? cluster_.device.intra_host : cluster_.device.cross_host;
    double latency = link.latency_us;
    // NCCL runs these as rings (no tree for them before its PAT algorithm), whose latency grows
    // with the ranks: at 512 ranks on 128 hosts a call waits about 2.5 ms before its bandwidth
    // term. All-reduce across hosts takes NCCL's tree (log hosts) and keeps the per-call figure.
    if (placement == Placement::cross_host && members_per_host > 0 &&
        (collective == "allgather" || collective == "reducescatter")) {
        const int hosts = (ranks + members_per_host - 1) / members_per_host;
        latency += (hosts - 1) * cluster_.device.cross_host.ring_step_us +
                   (ranks - hosts) * cluster_.device.intra_host.ring_step_us;
    }
    return latency + bytes * factor / (link.busbw_gbps * 1e3);
}

std::string CommModel::source(const std::string& collective, Placement placement) const {
    if (const CollectiveFit* fit = find(collective, placement))
        return "calibrated: " + fit->source + sweep_flags(fit->collective);
    return "uncalibrated: " + cluster_.device.source + " " + placement_name(placement) + " link";
}

namespace {

// fit_collective_documents' stages: each report's timed points gathered into series by
// (collective, placement), then one line fitted to each series.

// One collective and placement: its ranks, each size's medians (one per report) and the reports.
struct Series {
    int ranks = 0;
    std::map<double, std::vector<double>> times;
    std::vector<std::string> sources;
};
using SeriesByKey = std::map<std::pair<std::string, std::string>, Series>;  // (collective, placement)

// A report's fields that say it is a collective sweep, refusing any other document.
JsonFields sweep_fields(const nlohmann::json& report, const std::string& source) {
    if (!report.is_object() || report.value("schema", nlohmann::json()) != "parbench.report/v1")
        throw UsageError(source + ": not a parbench.report/v1 document; give collective reports "
                         "written by parbench <collective>|all --json");
    JsonFields fields(report, source);
    const std::string command = fields.optional_string("command").value_or("");
    if (command == "train" || command == "compare" || command == "pairs" || !fields.has("results"))
        throw UsageError(source + ": a '" + command + "' report, not a collective sweep; give "
                         "reports of parbench all (or one collective) -b 8 -e 64M --json");
    return fields;
}

struct TimedPoint {
    std::string collective;  // averaged_collective's name for an --op avg sweep
    double bytes = 0.0;
    double time_us = 0.0;
};

// One result's collective, size and median time, or nullopt for a point a fit passes over (an
// in-place half beside an out-of-place one, a skipped size, wrong elements, no or zero time).
std::optional<TimedPoint> timed_point(const JsonFields& point, bool has_out, bool nonblocking) {
    if (!point.has("collective") || !point.has("bytes")) return std::nullopt;
    // An averaged sweep (--op avg) and a non-blocking one (--nonblocking) are fitted apart: see
    // averaged_collective and nonblocking_collective.
    const bool averaged = point.has("op") && point.json()["op"].is_string() && point.string("op") == "avg";
    const std::string summed_or_averaged =
        averaged ? averaged_collective(point.string("collective")) : point.string("collective");
    const std::string collective = nonblocking ? nonblocking_collective(summed_or_averaged) : summed_or_averaged;
    if (has_out && point.optional_string("placement").value_or("") == "in") return std::nullopt;
    // "skipped" is a reason (a string) or a flag; "wrong" a count. A skipped size (8 B that a
    // 4-rank allgather cannot split) is reported with 0 bytes: passed over before its bytes are read.
    const nlohmann::json skipped = point.json().value("skipped", nlohmann::json(nullptr));
    if (!(skipped.is_null() || skipped == false)) return std::nullopt;
    const double bytes = static_cast<double>(point.integer("bytes", 1, max_calibration_bytes));
    if (point.has("wrong") && !point.json()["wrong"].is_null() &&
        point.number("wrong", 0, std::numeric_limits<double>::max()) != 0)
        return std::nullopt;
    const std::optional<double> time = median_time(point.json());
    if (!time) return std::nullopt;
    if (!std::isfinite(*time) || *time < 0 || *time > max_calibration_time_us)
        throw UsageError(point.name("time_us.median") + " must be a finite number of microseconds from 0 to " +
                         std::to_string(max_calibration_time_us) + ", got " + std::to_string(*time));
    if (*time == 0) return std::nullopt;
    return TimedPoint{collective, bytes, *time};
}

// Adds one report's timed points to their series.
void collect_report(const std::string& path, const nlohmann::json& report, SeriesByKey& series) {
    const JsonFields fields = sweep_fields(report, "--calibrate " + path);
    const std::size_t points = fields.array("results").size();
    int ranks = 0;
    if (fields.has("environment"))
        ranks = static_cast<int>(
            fields.object("environment").optional_integer("world_size", 1, cluster_limits::max_gpus).value_or(0));
    const std::string placement = group_placement(report);
    // config.nonblocking: the sweep timed each call's MPI_I* form and its wait (--nonblocking).
    bool nonblocking = false;
    if (fields.has("config") && fields.object("config").has("nonblocking")) {
        const JsonFields config = fields.object("config");
        if (!config.json()["nonblocking"].is_boolean())
            throw UsageError(config.name("nonblocking") + " must be true or false");
        nonblocking = config.json()["nonblocking"].get<bool>();
    }
    // --placement both writes an out-of-place and an in-place row per size: fit the out-of-place
    // one (the default half, as nccl-tests reports it first).
    bool has_out = false;
    for (std::size_t i = 0; i < points; ++i)
        has_out = has_out || fields.element("results", i).optional_string("placement").value_or("") == "out";
    for (std::size_t i = 0; i < points; ++i) {
        const std::optional<TimedPoint> point = timed_point(fields.element("results", i), has_out, nonblocking);
        if (!point) continue;
        Series& s = series[{point->collective, placement}];
        s.ranks = ranks;
        s.times[point->bytes].push_back(point->time_us);
        if (std::find(s.sources.begin(), s.sources.end(), path) == s.sources.end()) s.sources.push_back(path);
    }
}

// The alpha-beta line of one series (each size at the median of its reports' medians), refused
// when the time does not grow with size; nullopt for a group of one rank, which moves nothing.
std::optional<CollectiveFit> fit_series(const std::pair<std::string, std::string>& key, const Series& s) {
    if (s.times.size() < 3)
        throw UsageError("--calibrate: " + key.first + " has " + std::to_string(s.times.size()) +
                         " sizes; a fit needs at least 3 (sweep with -b 8 -e 64M)");
    if (s.ranks < 2) return std::nullopt;
    std::vector<Point> points;
    const double factor = bus_factor(key.first, s.ranks);
    for (const auto& [bytes, times] : s.times) {
        std::vector<double> sorted = times;
        std::sort(sorted.begin(), sorted.end());
        points.push_back({bytes * factor, sorted[sorted.size() / 2]});
    }
    std::string sources;
    for (const std::string& source : s.sources) sources += (sources.empty() ? "" : ", ") + source;
    const std::string what = "--calibrate " + sources + ": " + key.first + " (" + key.second + ", " +
                             std::to_string(s.ranks) + " ranks)";
    const std::optional<Line> line = fit_line(points);
    // A time that falls with size, or does not depend on it, has no bandwidth in it: a fit would
    // print one (1e9 GB/s) as if measured.
    const Point& smallest = points.front();
    const Point& largest = points.back();
    if (!line || line->alpha + line->beta * largest.bytes < min_size_dependence * (line->alpha + line->beta * smallest.bytes))
        throw UsageError(what + ": the time does not grow with the message size (" + point_text(smallest, factor) +
                         ", " + point_text(largest, factor) + "), so no bandwidth can be fitted; sweep up to sizes "
                         "where bandwidth dominates (parbench all -b 8 -e 64M --json), or drop this report");
    std::vector<double> errors;
    for (const Point& p : points) errors.push_back(std::abs(line->alpha + line->beta * p.bytes - p.time_us) / p.time_us);
    std::sort(errors.begin(), errors.end());
    CollectiveFit fit;
    fit.collective = key.first;
    fit.placement = key.second == "cross_host" ? Placement::cross_host : Placement::intra_host;
    fit.alpha_us = line->alpha;
    fit.busbw_gbps = 1.0 / line->beta / 1e3;
    fit.ranks = s.ranks;
    fit.sizes = static_cast<int>(points.size());
    for (const Point& p : points) fit.measured.emplace_back(p.bytes, p.time_us);
    fit.median_abs_error = errors[errors.size() / 2];
    fit.source = sources;
    char percent[32];
    std::snprintf(percent, sizeof percent, "%.0f %%", 100.0 * fit.median_abs_error);
    if (fit.median_abs_error > warn_fit_error)
        fit.warning = what + ": the fitted line misses the measured times by " + percent +
                      " in the median; inside the swept sizes plan takes the measured times, beyond them its " +
                      key.first + " times are that uncertain (sweep the sizes you plan for, with more --iters)";
    return fit;
}

}  // namespace

std::vector<CollectiveFit> fit_collective_documents(const std::vector<NamedDocument>& documents) {
    SeriesByKey series;
    for (const auto& [path, report] : documents) collect_report(path, report, series);
    if (series.empty())
        throw UsageError("--calibrate: no timed points found in the given reports; give collective size sweeps");
    std::vector<CollectiveFit> fits;
    for (const auto& [key, s] : series)
        if (std::optional<CollectiveFit> fit = fit_series(key, s)) fits.push_back(std::move(*fit));
    return fits;
}

std::vector<CollectiveFit> fit_collective_reports(const std::vector<std::string>& paths) {
    std::vector<NamedDocument> documents;
    for (const std::string& path : paths) {
        try {
            documents.push_back({path, read_json_file(path)});
        } catch (const UsageError& error) {
            throw UsageError(std::string("--calibrate: ") + error.what());
        }
    }
    return fit_collective_documents(documents);
}

nlohmann::json to_json(const CollectiveFit& fit) {
    return {{"collective", fit.collective},   {"placement", placement_name(fit.placement)},
            {"alpha_us", fit.alpha_us},       {"busbw_gbps", fit.busbw_gbps},
            {"ranks", fit.ranks},             {"sizes", fit.sizes},
            {"median_abs_error", fit.median_abs_error}, {"source", fit.source},
            {"inside_sweep", "the measured medians, linear between the two sizes around a call; the line beyond them"},
            {"warning", fit.warning.empty() ? nlohmann::json(nullptr) : nlohmann::json(fit.warning)}};
}

}  // namespace parbench

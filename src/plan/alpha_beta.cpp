#include "plan/alpha_beta.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.hpp"
#include "core/json_file.hpp"

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

// Weighted least squares of t = a + b·x with weights 1/t² (relative error).
std::pair<double, double> fit_line(const std::vector<Point>& points) {
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
    if (slope <= 0) slope = 1e-12;
    return {intercept, slope};
}

}  // namespace

std::string placement_name(Placement placement) {
    return placement == Placement::intra_host ? "intra_host" : "cross_host";
}

double bus_factor(const std::string& collective, int n) {
    const double ranks = n;
    if (collective == "allreduce") return 2.0 * (ranks - 1.0) / ranks;
    if (collective == "allgather" || collective == "reducescatter" || collective == "alltoall" ||
        collective == "alltoallv" || collective == "gather" || collective == "scatter")
        return (ranks - 1.0) / ranks;
    return 1.0;
}

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
    // A cross-host group with only an intra-host fit (or the reverse) falls back to the preset.
    return nullptr;
}

double CommModel::time_us(const std::string& collective, double bytes, int ranks, Placement placement) const {
    if (ranks <= 1) return 0.0;
    const double factor = bus_factor(collective, ranks);
    if (const CollectiveFit* fit = find(collective, placement))
        return fit->alpha_us + bytes * factor / (fit->busbw_gbps * 1e3);
    const LinkModel& link = placement == Placement::intra_host ? cluster_.device.intra_host : cluster_.device.cross_host;
    return link.latency_us + bytes * factor / (link.busbw_gbps * 1e3);
}

std::string CommModel::source(const std::string& collective, Placement placement) const {
    if (const CollectiveFit* fit = find(collective, placement)) return "calibrated: " + fit->source;
    return "uncalibrated: " + cluster_.device.source + " " + placement_name(placement) + " link";
}

std::vector<CollectiveFit> fit_collective_reports(const std::vector<std::string>& paths) {
    // (collective, placement) -> ranks, points by size (the median over reports of a size's medians)
    struct Series {
        int ranks = 0;
        std::map<double, std::vector<double>> times;
        std::vector<std::string> sources;
    };
    std::map<std::pair<std::string, std::string>, Series> series;
    for (const std::string& path : paths) {
        const nlohmann::json report = read_json_file(path);
        if (!report.is_object() || report.value("schema", std::string()) != "parbench.report/v1")
            throw UsageError("--calibrate " + path + ": not a parbench.report/v1 document; give collective reports "
                             "written by parbench <collective>|all --json");
        const std::string command = report.value("command", std::string());
        if (command == "train" || command == "compare" || !report.contains("results") || !report["results"].is_array())
            throw UsageError("--calibrate " + path + ": a '" + command + "' report, not a collective sweep; give "
                             "reports of parbench all (or one collective) -b 8 -e 64M --json");
        const int ranks = report.value("environment", nlohmann::json::object()).value("world_size", 0);
        const std::string placement = group_placement(report);
        // --placement both writes an out-of-place and an in-place row per size: fit the
        // out-of-place one (the default half, as nccl-tests reports it first).
        bool has_out = false;
        for (const nlohmann::json& point : report["results"])
            has_out = has_out || (point.is_object() && point.value("placement", std::string()) == "out");
        for (const nlohmann::json& point : report["results"]) {
            if (!point.is_object() || !point.contains("collective") || !point.contains("bytes")) continue;
            if (has_out && point.value("placement", std::string()) == "in") continue;
            // "skipped" is a reason (a string) or a flag; "wrong" a count.
            const nlohmann::json skipped = point.value("skipped", nlohmann::json(nullptr));
            if (!(skipped.is_null() || skipped == false)) continue;
            const nlohmann::json wrong = point.value("wrong", nlohmann::json(0));
            if (wrong.is_number() && wrong.get<double>() != 0) continue;
            const std::optional<double> time = median_time(point);
            if (!time || *time <= 0) continue;
            Series& s = series[{point["collective"].get<std::string>(), placement}];
            s.ranks = ranks;
            s.times[point["bytes"].get<double>()].push_back(*time);
            if (std::find(s.sources.begin(), s.sources.end(), path) == s.sources.end()) s.sources.push_back(path);
        }
    }
    if (series.empty())
        throw UsageError("--calibrate: no timed points found in the given reports; give collective size sweeps");
    std::vector<CollectiveFit> fits;
    for (const auto& [key, s] : series) {
        if (s.times.size() < 3)
            throw UsageError("--calibrate: " + key.first + " has " + std::to_string(s.times.size()) +
                             " sizes; a fit needs at least 3 (sweep with -b 8 -e 64M)");
        if (s.ranks < 2) continue;  // a group of one moves nothing: nothing to fit
        std::vector<Point> points;
        const double factor = bus_factor(key.first, s.ranks);
        for (const auto& [bytes, times] : s.times) {
            std::vector<double> sorted = times;
            std::sort(sorted.begin(), sorted.end());
            points.push_back({bytes * factor, sorted[sorted.size() / 2]});
        }
        const auto [alpha, beta] = fit_line(points);
        std::vector<double> errors;
        for (const Point& p : points) errors.push_back(std::abs(alpha + beta * p.bytes - p.time_us) / p.time_us);
        std::sort(errors.begin(), errors.end());
        CollectiveFit fit;
        fit.collective = key.first;
        fit.placement = key.second == "cross_host" ? Placement::cross_host : Placement::intra_host;
        fit.alpha_us = alpha;
        fit.busbw_gbps = 1.0 / beta / 1e3;
        fit.ranks = s.ranks;
        fit.sizes = static_cast<int>(points.size());
        fit.median_abs_error = errors[errors.size() / 2];
        for (const std::string& source : s.sources) fit.source += (fit.source.empty() ? "" : ", ") + source;
        fits.push_back(fit);
    }
    return fits;
}

nlohmann::json to_json(const CollectiveFit& fit) {
    return {{"collective", fit.collective},   {"placement", placement_name(fit.placement)},
            {"alpha_us", fit.alpha_us},       {"busbw_gbps", fit.busbw_gbps},
            {"ranks", fit.ranks},             {"sizes", fit.sizes},
            {"median_abs_error", fit.median_abs_error}, {"source", fit.source}};
}

}  // namespace parbench

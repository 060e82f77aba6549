#include "report/compare.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/error.hpp"
#include "report/point_runs.hpp"
#include "report/report_document.hpp"

namespace parbench {
namespace {

using PointKey = std::tuple<std::string, std::uint64_t, std::string, std::string, bool, std::string>;

// alltoallv's "zipf:1.2 seed 1" ("... combine" for --direction combine), "" for a point without a
// skew: points measured under
// different skews (or seeds, which draw different blocks) move the same bytes over different
// routes, and are not the same point.
std::string skew_of(const nlohmann::json& entry) {
    if (!entry.contains("skew") || !entry["skew"].is_object()) return "";
    const nlohmann::json& skew = entry["skew"];
    std::string text = skew.contains("distribution") && skew["distribution"].is_string()
                           ? skew["distribution"].get<std::string>()
                           : "?";
    if (skew.contains("seed") && skew["seed"].is_number_unsigned())
        text += " seed " + std::to_string(skew["seed"].get<std::uint64_t>());
    // The combine moves the dispatch's bytes the other way: another point. A report without the
    // key predates --direction and measured the dispatch.
    if (skew.contains("direction") && skew["direction"] == "combine") text += " combine";
    return text;
}

PointKey key_of(const nlohmann::json& entry) {
    return {entry.at("collective").get<std::string>(), entry.at("bytes").get<std::uint64_t>(),
            entry.at("dtype").get<std::string>(),
            entry.contains("op") && entry["op"].is_string() ? entry["op"].get<std::string>() : "",
            entry.at("inplace").get<bool>(), skew_of(entry)};
}

// "alltoallv" or "alltoallv (skew zipf:1.2 seed 1)"
std::string point_name(const std::string& collective, const std::string& skew) {
    return skew.empty() ? collective : collective + " (skew " + skew + ")";
}

bool measured(const nlohmann::json& entry) { return !entry.contains("skipped") && entry.contains("busbw_gbps"); }

// A point's per-iteration samples; empty when the report kept none (or not as numbers).
std::vector<double> samples_of(const nlohmann::json& entry) {
    std::vector<double> samples;
    if (!entry.contains("samples_us") || !entry["samples_us"].is_array()) return samples;
    for (const nlohmann::json& value : entry["samples_us"]) {
        if (!value.is_number() || !std::isfinite(value.get<double>())) return {};
        samples.push_back(value.get<double>());
    }
    return samples;
}

// Whether the point's reported time is a mean over its samples (--aggregate rank-mean,
// rank-max, rank-min: IMB's and OSU's way) rather than their median.
bool reports_mean(const nlohmann::json& entry) {
    return entry.contains("aggregation") && (entry["aggregation"] == "rank-mean" || entry["aggregation"] == "rank-max" ||
                                             entry["aggregation"] == "rank-min");
}

std::string ratio_text(double value, double reference) {
    if (reference <= 0.0) return "-";
    std::ostringstream text;
    text << std::fixed << std::setprecision(2) << value / reference << 'x';
    return text.str();
}

std::string number_text(double value) {
    std::ostringstream text;
    text << std::fixed << std::setprecision(2) << value;
    return text.str();
}

std::string percent_text(double fraction) {
    std::ostringstream text;
    text << std::defaultfloat << std::setprecision(4) << fraction * 100.0 << " %";
    return text.str();
}

// "beyond 0.48-0.52x (runs 5+5)", "within 0.91-1.07x (runs 1+3)", "within-run only: 0.91-1.07x",
// "no samples"
std::string noise_text(const NoiseVerdict& noise) {
    if (!noise.judged) return noise.source == NoiseSource::between_runs ? "no runs" : "no samples";
    std::ostringstream text;
    text << std::fixed << std::setprecision(2);
    if (noise.source == NoiseSource::within_run) {
        text << "within-run only: " << noise.low << '-' << noise.high << 'x';
        return text.str();
    }
    text << (noise.beyond() ? "beyond " : "within ") << noise.low << '-' << noise.high << "x (runs "
         << noise.runs.first << '+' << noise.runs.second;
    if (noise.interrupted > 0) text << ", " << noise.interrupted << " interrupted left out";
    text << ')';
    return text.str();
}

// A point's time in one run: what its report reports (the median, or the mean for rank-mean).
double run_time(const nlohmann::json& entry) {
    if (entry.contains("reported_time_us") && entry["reported_time_us"].is_number())
        return entry["reported_time_us"].get<double>();
    return entry.at("time_us").at("median").get<double>();
}

// The middle of a few values: the middle one, or the mean of the middle two.
double middle(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t half = values.size() / 2;
    return values.size() % 2 == 1 ? values[half] : (values[half - 1] + values[half]) / 2.0;
}

std::vector<std::vector<std::string>> table_rows(const Comparison& comparison) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> heading{"collective", "bytes", "dtype", "op", "inplace"};
    for (std::size_t r = 0; r < comparison.labels.size(); ++r) {
        const std::string column =
            r < comparison.setups.size() ? comparison.labels[r] + " (" + comparison.setups[r].describe() + ")"
                                         : comparison.labels[r];
        heading.push_back(column + " busbw GB/s");
        heading.push_back(comparison.labels[r] + " time us");
        if (r > 0) {
            heading.push_back(comparison.labels[r] + " busbw ratio");
            heading.push_back(comparison.labels[r] + " vs noise (" + percent_text(comparison.confidence) +
                              (comparison.between_runs > 1 ? " for all " + std::to_string(comparison.between_runs) +
                                                                 " run intervals together"
                                                           : " interval") +
                              ")");
        }
    }
    rows.push_back(heading);
    for (const ComparedPoint& point : comparison.points) {
        std::vector<std::string> row{point_name(point.collective, point.skew), std::to_string(point.bytes), point.dtype,
                                     point.op.empty() ? "-" : point.op, point.inplace ? "yes" : "no"};
        for (std::size_t r = 0; r < point.busbw_gbps.size(); ++r) {
            row.push_back(number_text(point.busbw_gbps[r]));
            row.push_back(number_text(point.median_us[r]));
            if (r > 0) {
                row.push_back(ratio_text(point.busbw_gbps[r], point.busbw_gbps[0]));
                row.push_back(noise_text(point.noise[r]));
            }
        }
        rows.push_back(row);
    }
    return rows;
}

}  // namespace

std::string ReportSetup::describe() const {
    return std::to_string(world_size) + (world_size == 1 ? " rank, " : " ranks, ") + backend + ", " + hosts +
           (pages.empty() || pages == "device memory" ? "" : ", " + pages + " pages") +
           (off_cache_bytes > 0 ? ", off cache " + std::to_string(off_cache_bytes) + " B" : "") +
           (nonblocking ? ", non-blocking" : "");
}

namespace {

// The fields a measured point needs, with the JSON type each must have.
void require_point_fields(const LabelledReport& report, std::size_t index, const nlohmann::json& entry) {
    const std::string where = "'" + report.label + "': result " + std::to_string(index + 1);
    auto need = [&](const char* key, bool ok, const char* type) {
        if (!entry.contains(key))
            throw UsageError(where + " lacks \"" + key + "\"; the report is damaged or not from parbench");
        if (!ok) throw UsageError(where + ": \"" + key + "\" is not " + type + "; the report is damaged");
    };
    need("collective", entry.contains("collective") && entry["collective"].is_string(), "a string");
    need("bytes", entry.contains("bytes") && entry["bytes"].is_number_unsigned(), "a byte count");
    need("dtype", entry.contains("dtype") && entry["dtype"].is_string(), "a string");
    need("inplace", entry.contains("inplace") && entry["inplace"].is_boolean(), "true or false");
    if (entry.contains("op") && !entry["op"].is_null() && !entry["op"].is_string())
        throw UsageError(where + ": \"op\" is not a string or null; the report is damaged");
    if (entry.contains("skipped")) return;
    need("busbw_gbps", entry.contains("busbw_gbps") && entry["busbw_gbps"].is_number(), "a number");
    need("time_us", entry.contains("time_us") && entry["time_us"].is_object() && entry["time_us"].contains("median") &&
                        entry["time_us"]["median"].is_number(),
         "statistics with a median");
}

}  // namespace

void check_collective_report(const LabelledReport& report) {
    const nlohmann::json& document = report.document;
    if (!document.is_object() || !document.contains("schema"))
        throw UsageError("'" + report.label + "' is not a parbench report (no \"schema\": \"" + report_schema +
                         "\"); give reports written with --json");
    if (document["schema"] != report_schema)
        throw UsageError("'" + report.label + "' has schema " + document["schema"].dump() + ", not \"" + report_schema +
                         "\"; compare reads " + report_schema + " reports (rerun with this parbench)");
    if (!document.contains("results") || !document["results"].is_array())
        throw UsageError("'" + report.label + "' has no results array; was the run interrupted before any point?");
    std::size_t measured_points = 0;
    for (std::size_t i = 0; i < document["results"].size(); ++i) {
        const nlohmann::json& entry = document["results"][i];
        if (!entry.is_object() || !entry.contains("collective"))
            throw UsageError("'" + report.label + "' holds no collective results (a '" +
                             (document.contains("command") && document["command"].is_string()
                                  ? document["command"].get<std::string>()
                                  : std::string("?")) +
                             "' report); compare takes reports of collective runs");
        require_point_fields(report, i, entry);
        if (!entry.contains("skipped")) ++measured_points;
    }
    if (measured_points == 0)
        throw UsageError("'" + report.label + "' holds no measured point" +
                         (document["results"].empty() ? " (its results are empty" : " (every point was skipped") +
                         (document.contains("status") && document["status"].is_string()
                              ? std::string(", status ") + document["status"].get<std::string>()
                              : std::string()) +
                         "); give a report of a run that measured something");
}

void check_report_status(const LabelledReport& report, bool allow_partial) {
    const nlohmann::json& document = report.document;
    if (!document.contains("status")) return;  // written before reports had one (check_collective_report ran)
    const nlohmann::json& status = document["status"];
    const std::string reason = document.contains("status_reason") && document["status_reason"].is_string()
                                   ? " (" + nlohmann::json(document["status_reason"]).dump() + ")"
                                   : std::string();
    if (status == "complete") return;
    if (status == "failed")
        throw UsageError("'" + report.label + "' is a failed run" + reason +
                         ": its figures are not comparable; fix the failure and measure again");
    if (status == "partial") {
        if (allow_partial) return;
        throw UsageError("'" + report.label + "' is partial" + reason +
                         ": the run ended before every point; measure again, or pass --allow-partial to compare the "
                         "points it has");
    }
    throw UsageError("'" + report.label + "' has status " + status.dump() +
                     ", not complete, partial or failed; the report is damaged");
}

namespace detail {

NoiseVerdict bootstrap_ratio(const std::vector<double>& a, const std::vector<double>& b, double observed,
                             bool means, double confidence, int resamples, std::uint64_t seed) {
    NoiseVerdict verdict;
    if (a.size() < 2 || b.size() < 2 || resamples < 1 || !std::isfinite(observed)) return verdict;
    // splitmix64 (Steele, Lea, Flood 2014): a fixed seed gives the same intervals on every machine,
    // where std::uniform_int_distribution's results differ between standard libraries.
    auto next = [state = seed]() mutable {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    };
    auto statistic = [means](std::vector<double>& values) {
        if (means) {
            double sum = 0.0;
            for (double v : values) sum += v;
            return sum / static_cast<double>(values.size());
        }
        // The median as the report computes it: the middle value, or the mean of the middle two.
        const std::size_t half = values.size() / 2;
        std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half), values.end());
        const double upper = values[half];
        if (values.size() % 2 == 1) return upper;
        return (*std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half)) + upper) / 2.0;
    };
    std::vector<double> scratch_a = a, scratch_b = b;
    const double stat_a = statistic(scratch_a);
    const double stat_b = statistic(scratch_b);
    if (!(stat_a > 0.0 && stat_b > 0.0 && std::isfinite(stat_a) && std::isfinite(stat_b))) return verdict;
    auto resample = [&](const std::vector<double>& from, std::vector<double>& into) {
        for (double& value : into) value = from[next() % from.size()];  // modulo bias below 2^-50 for these sizes
        return statistic(into);
    };
    std::vector<double> ratios(static_cast<std::size_t>(resamples));
    for (double& ratio : ratios) {
        const double a_star = resample(a, scratch_a);
        const double b_star = resample(b, scratch_b);
        ratio = observed * (a_star / stat_a) / (b_star / stat_b);  // busbw goes as 1 / time
        if (!std::isfinite(ratio)) return verdict;  // a sum past the double range: cannot tell
    }
    std::sort(ratios.begin(), ratios.end());
    const double tail = (1.0 - confidence) / 2.0;
    const auto at = [&](double q) {
        return ratios[static_cast<std::size_t>(std::floor(q * static_cast<double>(ratios.size() - 1)))];
    };
    verdict.judged = true;
    verdict.low = at(tail);
    verdict.high = at(1.0 - tail);
    return verdict;
}

}  // namespace detail

namespace {

ReportSetup setup_of(const nlohmann::json& document) {
    ReportSetup setup;
    const nlohmann::json& environment = document.contains("environment") ? document["environment"] : nlohmann::json();
    if (environment.is_object()) {
        if (environment.contains("world_size") && environment["world_size"].is_number_integer())
            setup.world_size = environment["world_size"].get<int>();
        if (environment.contains("backend") && environment["backend"].is_string())
            setup.backend = environment["backend"].get<std::string>();
        if (environment.contains("hosts") && environment["hosts"].is_array() && !environment["hosts"].empty() &&
            environment["hosts"][0].is_string()) {
            setup.hosts = environment["hosts"][0].get<std::string>();
            if (environment["hosts"].size() > 1) setup.hosts += "+" + std::to_string(environment["hosts"].size() - 1);
        }
    }
    if (setup.backend.empty()) setup.backend = "?";
    if (setup.hosts.empty()) setup.hosts = "?";
    if (environment.is_object() && environment.contains("buffer_pages") && environment["buffer_pages"].is_object() &&
        environment["buffer_pages"].contains("obtained") && environment["buffer_pages"]["obtained"].is_string())
        setup.pages = environment["buffer_pages"]["obtained"].get<std::string>();
    if (document.contains("config") && document["config"].is_object() && document["config"].contains("dtype") &&
        document["config"]["dtype"].is_string())
        setup.dtype = document["config"]["dtype"].get<std::string>();
    if (document.contains("config") && document["config"].is_object() &&
        document["config"].contains("off_cache_bytes") && document["config"]["off_cache_bytes"].is_number_unsigned())
        setup.off_cache_bytes = document["config"]["off_cache_bytes"].get<std::uint64_t>();
    if (document.contains("config") && document["config"].is_object() && document["config"].contains("nonblocking") &&
        document["config"]["nonblocking"].is_boolean())
        setup.nonblocking = document["config"]["nonblocking"].get<bool>();
    return setup;
}

// "allreduce 1024-16384 B float32; allgather 8 B float64"
std::string holdings(const nlohmann::json& document) {
    std::vector<std::string> parts;
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> ranges;
    std::vector<std::string> order;
    for (const nlohmann::json& entry : document["results"]) {
        if (!measured(entry)) continue;
        std::string name = point_name(entry["collective"].get<std::string>(), skew_of(entry)) + " " +
                           entry["dtype"].get<std::string>();
        if (entry.contains("op") && entry["op"].is_string()) name += " " + entry["op"].get<std::string>();
        if (entry["inplace"].get<bool>()) name += " in-place";
        const std::uint64_t bytes = entry["bytes"].get<std::uint64_t>();
        auto [where, fresh] = ranges.try_emplace(name, bytes, bytes);
        if (fresh) order.push_back(name);
        where->second.first = std::min(where->second.first, bytes);
        where->second.second = std::max(where->second.second, bytes);
    }
    std::string text;
    for (const std::string& name : order) {
        const auto [low, high] = ranges[name];
        text += (text.empty() ? "" : ", ") + name + " " + std::to_string(low) +
                (low == high ? "" : "-" + std::to_string(high)) + " B";
    }
    return text;
}

// A setting the points themselves do not show and that moves them as much as the code does:
// when the reports differ in it, a warning goes first, naming each report's value
// (`describe` of its setup; "" where a report predates the record, and then nothing is judged).
void warn_of_different_setting(Comparison& comparison, const std::function<std::string(const ReportSetup&)>& describe,
                               const std::string& what_differs, const std::string& record_and_fix) {
    std::string values;
    bool different = false;
    for (std::size_t r = 0; r < comparison.setups.size(); ++r) {
        const std::string value = describe(comparison.setups[r]);
        if (value.empty()) return;
        different = different || value != describe(comparison.setups[0]);
        values += (r ? ", " : "") + comparison.labels[r] + " " + value;
    }
    if (different)
        comparison.warnings.insert(comparison.warnings.begin(),
                                   what_differs + " (" + values + "; " + record_and_fix);
}

// The pages a host buffer is on (the same MPI loop ran 1.5x faster at 16 MiB on huge pages on
// this project's VM); buffers out of cache (--off-cache: 2-5x the hot time from about 1 MiB on a
// CPU host, results/2026-12-05-off-cache); the non-blocking form (--nonblocking: Open MPI's libnbc
// schedule, 1.5-1.8x the blocking all-reduce at 14.9 MB here, results/2026-12-05-nonblocking).
void warn_of_different_settings(Comparison& comparison) {
    warn_of_different_setting(
        comparison, [](const ReportSetup& setup) { return setup.pages; },
        "the reports' buffers were on different pages",
        "environment.buffer_pages, read back from the kernel): from about 1 MiB the ratios measure the pages as much "
        "as anything else; measure both with the same --buffer-pages on hosts with the same THP setting");
    warn_of_different_setting(
        comparison,
        [](const ReportSetup& setup) {
            return setup.off_cache_bytes > 0 ? "off cache over " + std::to_string(setup.off_cache_bytes) + " B"
                                             : std::string("hot");
        },
        "the reports' buffers were not equally out of cache",
        "config.off_cache_bytes): the ratios measure the caches as much as anything else; measure both with the same "
        "--off-cache");
    warn_of_different_setting(
        comparison,
        [](const ReportSetup& setup) { return std::string(setup.nonblocking ? "non-blocking" : "blocking"); },
        "the reports timed different forms of the calls",
        "config.nonblocking): the ratios measure the forms as much as anything else; measure both with or without "
        "--nonblocking");
}

}  // namespace

Comparison compare_reports(const std::vector<LabelledReport>& reports, const CompareOptions& options) {
    Comparison comparison;
    comparison.confidence = options.confidence;
    // Every entry of a point: one per sweep of a report made with --repeat (or merged from several).
    std::vector<std::map<PointKey, std::vector<const nlohmann::json*>>> indexes(reports.size());
    for (std::size_t r = 0; r < reports.size(); ++r) {
        check_collective_report(reports[r]);
        check_report_status(reports[r], options.allow_partial);
        if (reports[r].document.value("status", "") == "partial")
            comparison.warnings.push_back("'" + reports[r].label +
                                          "' is partial (--allow-partial): only the points it finished are compared");
        comparison.labels.push_back(reports[r].label);
        comparison.setups.push_back(setup_of(reports[r].document));
        for (const nlohmann::json& entry : reports[r].document["results"])
            if (measured(entry)) indexes[r][key_of(entry)].push_back(&entry);
    }
    std::vector<std::vector<std::vector<double>>> run_times;  // by point, by report: each run's time
    std::set<PointKey> seen;  // a point once, though a repeated report lists it once per sweep
    for (const nlohmann::json& entry : reports.front().document["results"]) {
        if (!measured(entry) || !seen.insert(key_of(entry)).second) continue;
        const PointKey key = key_of(entry);
        ComparedPoint point{std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key),
                            std::get<4>(key), std::get<5>(key), {}, {}, {}};
        std::vector<const std::vector<const nlohmann::json*>*> entries;
        std::vector<std::vector<double>> times;
        for (const auto& index : indexes) {
            const auto found = index.find(key);
            if (found == index.end()) break;
            entries.push_back(&found->second);
            // Over several runs, the middle run's figures.
            std::vector<double> busbw;
            times.emplace_back();
            for (const nlohmann::json* run : found->second) {
                busbw.push_back(run->at("busbw_gbps").get<double>());
                times.back().push_back(run_time(*run));
            }
            point.busbw_gbps.push_back(middle(busbw));
            std::vector<double> medians;
            for (const nlohmann::json* run : found->second) medians.push_back(run->at("time_us").at("median").get<double>());
            point.median_us.push_back(middle(medians));
        }
        if (entries.size() != reports.size()) {
            ++comparison.unshared;
            continue;
        }
        point.noise.resize(reports.size());
        // One run a side: only the iterations' spread (the first run's samples).
        const std::vector<double> first = samples_of(*entries[0]->front());
        for (std::size_t r = 1; r < reports.size(); ++r) {
            if (times[0].size() > 1 || times[r].size() > 1) continue;  // between runs, once all are counted
            const double observed = point.busbw_gbps[0] > 0.0 ? point.busbw_gbps[r] / point.busbw_gbps[0]
                                                              : std::numeric_limits<double>::quiet_NaN();
            // The seed depends on the point's place alone: the same reports give the same intervals.
            const std::uint64_t seed = 0x5eedull * 1000003ull + comparison.points.size() * 131ull + r;
            point.noise[r] = detail::bootstrap_ratio(first, samples_of(*entries[r]->front()), observed,
                                                     reports_mean(*entries[0]->front()) ||
                                                         reports_mean(*entries[r]->front()),
                                                     options.confidence, options.resamples, seed);
        }
        run_times.push_back(std::move(times));
        comparison.points.push_back(std::move(point));
    }
    // Between runs: every such interval holds at --confidence together with the others.
    for (const auto& times : run_times)
        for (std::size_t r = 1; r < times.size(); ++r) comparison.between_runs += times[0].size() > 1 || times[r].size() > 1;
    const double each = per_interval_confidence(options.confidence, comparison.between_runs);
    for (std::size_t p = 0; p < comparison.points.size(); ++p) {
        ComparedPoint& point = comparison.points[p];
        const auto& times = run_times[p];
        for (std::size_t r = 1; r < times.size(); ++r) {
            if (times[0].size() < 2 && times[r].size() < 2) continue;
            const double observed = point.busbw_gbps[0] > 0.0 ? point.busbw_gbps[r] / point.busbw_gbps[0]
                                                              : std::numeric_limits<double>::quiet_NaN();
            point.noise[r] = between_runs_ratio(times[0], times[r], observed, each);
        }
    }
    if (comparison.points.empty()) {
        std::string text = "the reports share no point (same collective, size, type, op, placement and skew); they hold: ";
        for (std::size_t r = 0; r < reports.size(); ++r)
            text += (r ? "; " : "") + reports[r].label + ": " + holdings(reports[r].document);
        throw UsageError(text);
    }
    auto differ = [&](const char* what, auto field) {
        std::string values;
        bool different = false;
        for (std::size_t r = 0; r < reports.size(); ++r) {
            different = different || field(comparison.setups[r]) != field(comparison.setups[0]);
            values += (r ? ", " : "") + comparison.labels[r] + " " + field(comparison.setups[r]);
        }
        if (different)
            comparison.warnings.push_back(std::string("the reports differ in ") + what + " (" + values +
                                          "): the ratios compare different setups");
    };
    differ("world size", [](const ReportSetup& s) { return std::to_string(s.world_size); });
    differ("backend", [](const ReportSetup& s) { return s.backend; });
    differ("dtype", [](const ReportSetup& s) { return s.dtype; });
    warn_of_different_settings(comparison);
    return comparison;
}

std::vector<std::string> distinct_labels(const std::vector<std::string>& paths) {
    std::vector<std::vector<std::string>> parts;
    for (const std::string& path : paths) {
        std::vector<std::string> components;
        for (const auto& component : std::filesystem::path(path).lexically_normal())
            if (!component.empty()) components.push_back(component.string());
        if (components.empty()) components.push_back(path);
        parts.push_back(std::move(components));
    }
    auto suffix = [](const std::vector<std::string>& components, std::size_t k) {
        std::string text;
        for (std::size_t i = components.size() - std::min(k, components.size()); i < components.size(); ++i)
            text += (text.empty() || text == "/" ? "" : "/") + components[i];
        return text;
    };
    std::vector<std::string> labels;
    for (std::size_t p = 0; p < parts.size(); ++p) {
        std::size_t k = 1;
        for (; k < parts[p].size(); ++k) {
            bool unique = true;
            for (std::size_t q = 0; q < parts.size() && unique; ++q)
                if (q != p && parts[q] != parts[p] && suffix(parts[q], k) == suffix(parts[p], k)) unique = false;
            if (unique) break;
        }
        std::string label = suffix(parts[p], k);
        const auto copies = std::count(labels.begin(), labels.end(), label) +
                            std::count_if(labels.begin(), labels.end(), [&](const std::string& l) {
                                return l.rfind(label + " (", 0) == 0;
                            });
        if (copies > 0) label += " (" + std::to_string(copies + 1) + ")";
        labels.push_back(label);
    }
    return labels;
}

ThresholdVerdict judge_threshold(const Comparison& comparison, double threshold, double confidence) {
    ThresholdVerdict verdict;
    for (const ComparedPoint& point : comparison.points) {
        for (std::size_t r = 1; r < point.busbw_gbps.size(); ++r) {
            if (point.busbw_gbps[0] <= 0.0) continue;
            const double ratio = point.busbw_gbps[r] / point.busbw_gbps[0];
            if (ratio >= threshold) continue;
            const NoiseVerdict& noise = point.noise[r];
            // A drop counts when the whole interval between runs lies below the threshold: the
            // point is slower than the threshold allows beyond what runs of it differ by. One run a
            // side shows no such spread: below the threshold, but not judged.
            const bool runs = noise.judged && noise.source == NoiseSource::between_runs;
            const bool significant = runs && noise.high < threshold;
            std::ostringstream line;
            line << point_name(point.collective, point.skew) << ' ' << point.bytes << " B " << point.dtype
                 << (point.op.empty() ? "" : " " + point.op) << (point.inplace ? " in-place" : "") << ": "
                 << comparison.labels[r] << " busbw " << number_text(point.busbw_gbps[r]) << " GB/s is "
                 << std::fixed << std::setprecision(3) << ratio << "x of " << comparison.labels[0] << "'s "
                 << number_text(point.busbw_gbps[0]) << " GB/s, below --threshold " << threshold;
            if (!runs) {
                line << "; one run a side shows only " << (noise.judged ? "its iterations' spread" : "itself")
                     << ", not the spread between runs (measure with --repeat 3, or give several reports a side: "
                        "a.json,b.json)";
                verdict.unjudged.push_back(line.str());
                continue;
            }
            line << "; " << percent_text(comparison.between_runs > 1 ? per_interval_confidence(confidence, comparison.between_runs)
                                                                     : confidence)
                 << " interval from runs " << noise.runs.first << '+' << noise.runs.second << ' ' << std::setprecision(2)
                 << noise.low << '-' << noise.high << "x: "
                 << (significant ? "beyond run-to-run noise" : "within run-to-run noise");
            (significant ? verdict.regressions : verdict.within_noise).push_back(line.str());
        }
    }
    return verdict;
}

std::string render(const Comparison& comparison, CompareFormat format) {
    std::string missing_note;
    if (comparison.unshared > 0)
        missing_note = "# " + std::to_string(comparison.unshared) + " point(s) of " + comparison.labels.front() +
                       " are missing from another report and are not shown\n";
    const std::string text = render_table(table_rows(comparison), format, 5);
    if (format == CompareFormat::markdown) return missing_note.empty() ? text : text + '\n' + missing_note.substr(2);
    return text + missing_note;
}

}  // namespace parbench

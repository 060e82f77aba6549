#include "report/compare.hpp"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <map>
#include <sstream>
#include <tuple>

#include "core/error.hpp"
#include "report/report_document.hpp"

namespace parbench {
namespace {

using PointKey = std::tuple<std::string, std::uint64_t, std::string, std::string, bool>;

PointKey key_of(const nlohmann::json& entry) {
    return {entry.at("collective").get<std::string>(), entry.at("bytes").get<std::uint64_t>(),
            entry.at("dtype").get<std::string>(),
            entry.contains("op") && entry["op"].is_string() ? entry["op"].get<std::string>() : "",
            entry.at("inplace").get<bool>()};
}

bool measured(const nlohmann::json& entry) { return !entry.contains("skipped") && entry.contains("busbw_gbps"); }

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

// A label holding a comma or quote is quoted, as RFC 4180 says.
std::string csv_cell(const std::string& cell) {
    if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
    std::string quoted = "\"";
    for (char c : cell) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
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
        if (r > 0) heading.push_back(comparison.labels[r] + " busbw ratio");
    }
    rows.push_back(heading);
    for (const ComparedPoint& point : comparison.points) {
        std::vector<std::string> row{point.collective, std::to_string(point.bytes), point.dtype,
                                     point.op.empty() ? "-" : point.op, point.inplace ? "yes" : "no"};
        for (std::size_t r = 0; r < point.busbw_gbps.size(); ++r) {
            row.push_back(number_text(point.busbw_gbps[r]));
            row.push_back(number_text(point.median_us[r]));
            if (r > 0) row.push_back(ratio_text(point.busbw_gbps[r], point.busbw_gbps[0]));
        }
        rows.push_back(row);
    }
    return rows;
}

}  // namespace

std::string ReportSetup::describe() const {
    return std::to_string(world_size) + (world_size == 1 ? " rank, " : " ranks, ") + backend + ", " + hosts;
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
    if (document.contains("config") && document["config"].is_object() && document["config"].contains("dtype") &&
        document["config"]["dtype"].is_string())
        setup.dtype = document["config"]["dtype"].get<std::string>();
    return setup;
}

// "allreduce 1024-16384 B float32; allgather 8 B float64"
std::string holdings(const nlohmann::json& document) {
    std::vector<std::string> parts;
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> ranges;
    std::vector<std::string> order;
    for (const nlohmann::json& entry : document["results"]) {
        if (!measured(entry)) continue;
        std::string name = entry["collective"].get<std::string>() + " " + entry["dtype"].get<std::string>();
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

}  // namespace

Comparison compare_reports(const std::vector<LabelledReport>& reports) {
    Comparison comparison;
    std::vector<std::map<PointKey, const nlohmann::json*>> indexes(reports.size());
    for (std::size_t r = 0; r < reports.size(); ++r) {
        check_collective_report(reports[r]);
        comparison.labels.push_back(reports[r].label);
        comparison.setups.push_back(setup_of(reports[r].document));
        for (const nlohmann::json& entry : reports[r].document["results"])
            if (measured(entry)) indexes[r].emplace(key_of(entry), &entry);
    }
    for (const nlohmann::json& entry : reports.front().document["results"]) {
        if (!measured(entry)) continue;
        const PointKey key = key_of(entry);
        ComparedPoint point{std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key),
                            std::get<4>(key), {}, {}};
        bool shared = true;
        for (const auto& index : indexes) {
            const auto found = index.find(key);
            if (found == index.end()) {
                shared = false;
                break;
            }
            point.busbw_gbps.push_back(found->second->at("busbw_gbps").get<double>());
            point.median_us.push_back(found->second->at("time_us").at("median").get<double>());
        }
        if (shared)
            comparison.points.push_back(std::move(point));
        else
            ++comparison.unshared;
    }
    if (comparison.points.empty()) {
        std::string text = "the reports share no point (same collective, size, type, op and placement); they hold: ";
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

std::vector<std::string> below_threshold(const Comparison& comparison, double threshold) {
    std::vector<std::string> lines;
    for (const ComparedPoint& point : comparison.points) {
        for (std::size_t r = 1; r < point.busbw_gbps.size(); ++r) {
            if (point.busbw_gbps[0] <= 0.0) continue;
            const double ratio = point.busbw_gbps[r] / point.busbw_gbps[0];
            if (ratio >= threshold) continue;
            std::ostringstream line;
            line << point.collective << ' ' << point.bytes << " B " << point.dtype
                 << (point.op.empty() ? "" : " " + point.op) << (point.inplace ? " in-place" : "") << ": "
                 << comparison.labels[r] << " busbw " << number_text(point.busbw_gbps[r]) << " GB/s is "
                 << std::fixed << std::setprecision(3) << ratio << "x of " << comparison.labels[0] << "'s "
                 << number_text(point.busbw_gbps[0]) << " GB/s, below --threshold " << threshold;
            lines.push_back(line.str());
        }
    }
    return lines;
}

std::string render(const Comparison& comparison, CompareFormat format) {
    const auto rows = table_rows(comparison);
    std::ostringstream out;
    std::string missing_note;
    if (comparison.unshared > 0)
        missing_note = "# " + std::to_string(comparison.unshared) + " point(s) of " + comparison.labels.front() +
                       " are missing from another report and are not shown\n";
    if (format == CompareFormat::csv) {
        for (const auto& row : rows) {
            for (std::size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << csv_cell(row[c]);
            out << '\n';
        }
        return out.str() + missing_note;
    }
    if (format == CompareFormat::markdown) {
        for (std::size_t r = 0; r < rows.size(); ++r) {
            out << '|';
            for (const auto& cell : rows[r]) out << ' ' << cell << " |";
            out << '\n';
            if (r == 0) {
                out << '|';
                for (std::size_t c = 0; c < rows[r].size(); ++c) out << (c < 5 ? " --- |" : " ---: |");
                out << '\n';
            }
        }
        if (!missing_note.empty()) out << '\n' << missing_note.substr(2);
        return out.str();
    }
    std::vector<std::size_t> widths(rows.front().size(), 0);
    for (const auto& row : rows)
        for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    for (const auto& row : rows) {
        for (std::size_t c = 0; c < row.size(); ++c)
            out << (c ? "  " : "") << std::setw(static_cast<int>(widths[c])) << row[c];
        out << '\n';
    }
    return out.str() + missing_note;
}

}  // namespace parbench

#include "report/compare.hpp"

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
            entry.at("dtype").get<std::string>(), entry["op"].is_string() ? entry["op"].get<std::string>() : "",
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

std::vector<std::vector<std::string>> table_rows(const Comparison& comparison) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> heading{"collective", "bytes", "dtype", "op", "inplace"};
    for (std::size_t r = 0; r < comparison.labels.size(); ++r) {
        heading.push_back(comparison.labels[r] + " busbw GB/s");
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

void check_collective_report(const LabelledReport& report) {
    const nlohmann::json& document = report.document;
    if (!document.is_object() || document.value("schema", "") != report_schema)
        throw UsageError("'" + report.label + "' is not a parbench report (no \"schema\": \"" + report_schema +
                         "\"); give reports written with --json");
    if (!document.contains("results") || !document["results"].is_array())
        throw UsageError("'" + report.label + "' has no results array; was the run interrupted before any point?");
    for (const nlohmann::json& entry : document["results"]) {
        if (!entry.is_object() || !entry.contains("collective") || !entry.contains("bytes"))
            throw UsageError("'" + report.label + "' holds no collective results (a '" +
                             document.value("command", std::string("?")) +
                             "' report); compare takes reports of collective runs");
    }
}

Comparison compare_reports(const std::vector<LabelledReport>& reports) {
    Comparison comparison;
    std::vector<std::map<PointKey, const nlohmann::json*>> indexes(reports.size());
    for (std::size_t r = 0; r < reports.size(); ++r) {
        check_collective_report(reports[r]);
        comparison.labels.push_back(reports[r].label);
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
    return comparison;
}

std::string render(const Comparison& comparison, CompareFormat format) {
    const auto rows = table_rows(comparison);
    std::ostringstream out;
    if (format == CompareFormat::csv) {
        for (const auto& row : rows) {
            for (std::size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << row[c];
            out << '\n';
        }
        return out.str();
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
    if (comparison.unshared > 0)
        out << "# " << comparison.unshared << " point(s) of " << comparison.labels.front()
            << " are missing from another report and are not shown\n";
    return out.str();
}

}  // namespace parbench

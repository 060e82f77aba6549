#include "report/text_table.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace parbench {
namespace {

// A cell holding a comma, quote or line break is quoted, as RFC 4180 says.
std::string csv_cell(const std::string& cell) {
    if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
    std::string quoted = "\"";
    for (char c : cell) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
}

}  // namespace

std::string render_table(const TableRows& rows, TableFormat format, std::size_t text_columns) {
    std::ostringstream out;
    if (rows.empty()) return {};
    if (format == TableFormat::csv) {
        for (const auto& row : rows) {
            for (std::size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << csv_cell(row[c]);
            out << '\n';
        }
        return out.str();
    }
    if (format == TableFormat::markdown) {
        for (std::size_t r = 0; r < rows.size(); ++r) {
            out << '|';
            for (const auto& cell : rows[r]) out << ' ' << cell << " |";
            out << '\n';
            if (r == 0) {
                out << '|';
                for (std::size_t c = 0; c < rows[r].size(); ++c) out << (c < text_columns ? " --- |" : " ---: |");
                out << '\n';
            }
        }
        return out.str();
    }
    std::vector<std::size_t> widths(rows.front().size(), 0);
    for (const auto& row : rows)
        for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    for (const auto& row : rows) {
        for (std::size_t c = 0; c < row.size(); ++c)
            out << (c ? "  " : "") << std::setw(static_cast<int>(c < widths.size() ? widths[c] : 0)) << row[c];
        out << '\n';
    }
    return out.str();
}

}  // namespace parbench

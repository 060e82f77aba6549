// A table of text cells as the console, Markdown or CSV shows it: the first row is the heading;
// the first `text_columns` columns are left-aligned in Markdown, the rest (figures) right-aligned.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace parbench {

enum class TableFormat { console, markdown, csv };
using TableRows = std::vector<std::vector<std::string>>;

std::string render_table(const TableRows& rows, TableFormat format, std::size_t text_columns);

}  // namespace parbench

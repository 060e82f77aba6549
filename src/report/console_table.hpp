// The console report: a header that states the environment and the method, then one row
// per size with the out-of-place and in-place halves side by side, aligned like
// nccl-tests' so its users read it at a glance, then the closing summary.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>

#include "report/collective_result.hpp"

namespace parbench {

// frame: the report frame (environment, config); method: one line describing the timing.
void print_console_header(std::ostream& out, const nlohmann::json& frame, const std::string& method);

// Which halves the table has.
struct Placements {
    bool out_of_place = true;
    bool in_place = true;
};
void print_console_columns(std::ostream& out, const std::string& collective, Placements placements,
                           std::string_view time_statistic);
// One size: either half may be absent (not asked for); at least one is given.
void print_console_row(std::ostream& out, Placements placements, const CollectiveResult* out_of_place,
                       const CollectiveResult* in_place);
void print_console_summary(std::ostream& out, const RunSummary& summary);

}  // namespace parbench

// The console report: a header that states the environment and the method, then one row
// per size with the out-of-place and in-place halves side by side, aligned like
// nccl-tests' so its users read it at a glance, then the closing summary.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>

#include "report/collective_result.hpp"

namespace parbench {

// frame: the report frame (environment, config); method: one line describing the timing.
void print_console_header(std::ostream& out, const nlohmann::json& frame, const std::string& method);

// Which halves the table has.
struct Placements {
    bool out_of_place = true;
    bool in_place = true;
    bool verdicts = false;  // each half ends with the ratio to the expected busbw and the verdict
    // --full (OSU's -f): each half also shows the fastest and slowest rank's mean time and the
    // p95 sample, each with its rank (CollectiveResult::full).
    bool full = false;
};
void print_console_columns(std::ostream& out, const std::string& collective, Placements placements,
                           std::string_view time_statistic);
// One size: either half may be absent (not asked for); at least one is given.
void print_console_row(std::ostream& out, Placements placements, const CollectiveResult* out_of_place,
                       const CollectiveResult* in_place);
// The closing lines: wrong elements, average and peak busbw, then nccl-tests' own two lines
// ("# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.1087") for the log scrapers
// written for it; `min_busbw_gbps`, the run's gate, adds OK or FAILED to the second as nccl-tests does.
void print_console_summary(std::ostream& out, const RunSummary& summary,
                           std::optional<double> min_busbw_gbps = std::nullopt);
// What the average busbw is a mean over: "the 51 measured sizes", "the 2 measured points (1 size,
// out of place and in place)".
std::string average_scope(const RunSummary& summary);
// The closing tally of warnings, without "warning: ": "1 of 1 points warned: slow first sample
// (1), wide spread (1)"; nullopt when no point warned.
std::optional<std::string> warning_tally(const RunSummary& summary);

}  // namespace parbench

// The console report: a header that states the environment and the method, then one row
// per size, aligned like nccl-tests' so its users read it at a glance.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>

#include "report/collective_result.hpp"

namespace parbench {

// frame: the report frame (environment, config); method: one line describing the timing.
void print_console_header(std::ostream& out, const nlohmann::json& frame, const std::string& method);
void print_console_columns(std::ostream& out, const std::string& collective);
void print_console_row(std::ostream& out, const CollectiveResult& result);

}  // namespace parbench

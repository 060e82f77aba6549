// The frame every report shares ("schema": "parbench.report/v1"): what ran, where, how,
// and when; each command adds its own "results". schemas/report.schema.json describes it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "report/environment.hpp"

namespace parbench {

inline constexpr const char* report_schema = "parbench.report/v1";

nlohmann::json report_frame(const std::string& command, const std::vector<std::string>& argv,
                            const std::string& started_at, const Environment& environment,
                            const nlohmann::json& config);
std::string utc_now_iso8601();

}  // namespace parbench

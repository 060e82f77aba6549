#include "report/report_document.hpp"
#include "core/version.hpp"

#include <chrono>
#include <ctime>

namespace parbench {

std::string utc_now_iso8601() {
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm utc{};
    gmtime_r(&now, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

nlohmann::json report_frame(const std::string& command, const std::vector<std::string>& argv,
                            const std::string& started_at, const Environment& environment,
                            const nlohmann::json& config) {
    return {
        {"schema", report_schema},
        {"tool", {{"name", "parbench"}, {"version", tool_version}, {"git", git_revision()}}},
        {"command", command},
        {"argv", argv},
        {"started_at", started_at},
        {"finished_at", nullptr},
        {"environment", to_json(environment)},
        {"config", config},
        {"results", nlohmann::json::array()},
        {"status", "partial"},
        {"status_reason", "in progress"},
    };
}

}  // namespace parbench

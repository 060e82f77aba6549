#include "report/chrome_trace.hpp"

namespace parbench {

nlohmann::json chrome_trace_json(const std::vector<TraceEvent>& events, const std::vector<std::string>& process_names,
                                 const nlohmann::json& metadata) {
    nlohmann::json trace_events = nlohmann::json::array();
    for (std::size_t pid = 0; pid < process_names.size(); ++pid) {
        trace_events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                                {"args", {{"name", process_names[pid]}}}});
        // Rows in rank order rather than by name.
        trace_events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                                {"args", {{"sort_index", pid}}}});
    }
    for (const TraceEvent& e : events)
        trace_events.push_back({{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"pid", e.pid}, {"tid", e.tid},
                                {"ts", e.ts_us}, {"dur", e.dur_us}, {"args", e.args}});
    return {{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}, {"otherData", metadata}};
}

}  // namespace parbench

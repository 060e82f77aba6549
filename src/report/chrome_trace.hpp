// Chrome trace / Perfetto JSON ("Trace Event Format"): complete events (ph "X") with ts and
// dur in microseconds, one process per rank (pid = rank, named by a metadata event) and one
// track in it (tid 0), so chrome://tracing and ui.perfetto.dev show one row per rank.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace parbench {

struct TraceEvent {
    std::string name;
    std::string category;
    int pid = 0;
    int tid = 0;
    double ts_us = 0.0;
    double dur_us = 0.0;
    nlohmann::json args = nlohmann::json::object();
};

// `process_names[pid]` labels each rank's row; `metadata` goes to the document's otherData.
nlohmann::json chrome_trace_json(const std::vector<TraceEvent>& events, const std::vector<std::string>& process_names,
                                 const nlohmann::json& metadata);

}  // namespace parbench

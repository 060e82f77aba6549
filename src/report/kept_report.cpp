#include "report/kept_report.hpp"

#include "core/json_file.hpp"
#include "report/report_document.hpp"

namespace parbench {

std::string run_status_name(RunStatus status) {
    switch (status) {
        case RunStatus::complete: return "complete";
        case RunStatus::partial: return "partial";
        case RunStatus::failed: return "failed";
    }
    return "failed";
}

void set_status(nlohmann::json& document, RunStatus status, const std::string& reason) {
    document["status"] = run_status_name(status);
    if (status == RunStatus::complete)
        document.erase("status_reason");
    else
        document["status_reason"] = reason.empty() ? std::string("not given") : reason;
}

void KeptReport::write(nlohmann::json document, RunStatus status, const std::string& reason) {
    if (path_.empty()) return;
    set_status(document, status, reason);
    std::lock_guard lock(mutex_);
    write_json_atomically(path_, document);
    last_ = std::move(document);
}

void KeptReport::abandon(const std::string& reason) noexcept {
    try {
        std::lock_guard lock(mutex_);
        if (path_.empty() || !last_) return;
        set_status(*last_, RunStatus::partial, reason);
        (*last_)["finished_at"] = utc_now_iso8601();
        write_json_atomically(path_, *last_);
    } catch (...) {
        // The job is ending on a hang: a report that cannot be rewritten keeps its last state.
    }
}

}  // namespace parbench

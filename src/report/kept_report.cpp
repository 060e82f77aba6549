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
    if (concluded_) return;
    write_json_atomically(path_, document);
    last_ = std::move(document);
}

void KeptReport::conclude(const std::function<void(nlohmann::json& document)>& finish) noexcept {
    try {
        std::lock_guard lock(mutex_);
        if (path_.empty() || !last_ || concluded_) return;
        concluded_ = true;
        finish(*last_);
        write_json_atomically(path_, *last_);
    } catch (...) {
        // The job is ending: a report that cannot be rewritten keeps its last state.
    }
}

void KeptReport::abandon(const std::string& reason) noexcept {
    conclude([&reason](nlohmann::json& document) {
        set_status(document, RunStatus::partial, reason);
        document["finished_at"] = utc_now_iso8601();
    });
}

}  // namespace parbench

// A report file that keeps what was measured: rewritten after every finished point or step
// with "status": "partial" (and why), and once more at the end as "complete" or "failed".
// The watchdog's or the signal watcher's thread may rewrite the last document as it ends the
// job (abandon, conclude), so the file says why the run stopped; every method is safe to call
// from another thread.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace parbench {

enum class RunStatus { complete, partial, failed };
std::string run_status_name(RunStatus status);

// Sets "status" and, unless complete, "status_reason" on a report document.
void set_status(nlohmann::json& document, RunStatus status, const std::string& reason = {});

class KeptReport {
  public:
    // An empty path keeps nothing (the flag was not given, or this rank does not write).
    explicit KeptReport(std::string path) : path_(std::move(path)) {}
    KeptReport(const KeptReport&) = delete;
    KeptReport& operator=(const KeptReport&) = delete;

    void write(nlohmann::json document, RunStatus status, const std::string& reason = {});
    // Rewrites the last written document as `finish` changes it (its status, how the run ended)
    // and keeps it: the run is ending, so later writes are ignored (a step finishing meanwhile on
    // the main thread must not overwrite it). Nothing if no document was written.
    void conclude(const std::function<void(nlohmann::json& document)>& finish) noexcept;
    // conclude() as partial with `reason`, and the time it ended.
    void abandon(const std::string& reason) noexcept;

  private:
    std::string path_;
    std::mutex mutex_;
    std::optional<nlohmann::json> last_;
    bool concluded_ = false;
};

}  // namespace parbench

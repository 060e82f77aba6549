// NCCL's own debug log, turned on for a run so that its report can say what NCCL chose (the
// lines report/nccl_choices.hpp reads). NCCL reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and
// NCCL_DEBUG_FILE once, at its first log call (during the communicator's initialisation), so
// they are set in this process before the NCCL backend is made, and only when the user set
// neither NCCL_DEBUG nor NCCL_DEBUG_FILE: a log the user asked for is theirs, and the report
// then says why it holds no choices.
//
// The subsystems: INIT, ENV and NET print once, at initialisation (the version, every
// parameter taken from the environment, the network and the transport of each connection,
// NVLS support); TUNING adds one line per collective call on rank 0 (its algorithm, protocol
// and channels), which costs that rank a formatted write inside every timed call, so it is
// asked for separately (--nccl-choices).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace parbench {

enum class NcclLogLevel { none, init, per_call };

class NcclLogCapture {
  public:
    explicit NcclLogCapture(NcclLogLevel level);
    ~NcclLogCapture();  // restores the environment it changed and removes its file
    NcclLogCapture(const NcclLogCapture&) = delete;
    NcclLogCapture& operator=(const NcclLogCapture&) = delete;

    bool capturing() const { return reason_.empty(); }
    bool per_call() const { return level_ == NcclLogLevel::per_call; }
    // Why nothing is captured (NCCL_DEBUG set by the user), "" when capturing.
    const std::string& reason() const { return reason_; }
    // What NCCL appended to the log since the last call ("" when not capturing).
    std::string read_new();

  private:
    NcclLogLevel level_;
    std::string path_;
    std::uint64_t offset_ = 0;
    std::string reason_;
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;  // variable, value before
};

// Every NCCL_* variable of this process's environment, as NCCL will read it.
nlohmann::json nccl_environment();

}  // namespace parbench

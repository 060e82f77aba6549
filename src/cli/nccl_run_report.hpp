// What NCCL chose, for a collective run on the NCCL backend: the log its backend captured
// (comm/nccl_log_capture.hpp) read after NCCL's initialisation and after every point
// (report/nccl_choices.hpp), into the report's "nccl" (version, every NCCL_* variable of the
// environment and every parameter NCCL says it took from it, the network, the transport of each
// level, NVLS, the fallback warnings) and each point's "nccl_choice" (algorithm, protocol,
// channels: --nccl-choices). Rank 0 reads its own log; the other ranks' NCCL logs to files of
// their own that their captures remove.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "comm/nccl_log_capture.hpp"
#include "report/nccl_choices.hpp"

namespace parbench {

class NcclRunReport {
  public:
    // `capture`: the backend's, null on the MPI backend (then everything here is a no-op).
    explicit NcclRunReport(NcclLogCapture* capture);
    bool active() const { return capture_ != nullptr; }
    // After the communicator is made: the initialisation's lines.
    void read_initialisation();
    // After a point of `collective`: its calls' choice, or null (no per-call log, or a collective
    // NCCL runs as grouped send/recv, which its tuner does not choose for).
    nlohmann::json point_choice(const std::string& collective);
    std::vector<NcclWarning> warnings() const;
    // For a verdict's cause: what the transport says, "" when nothing is amiss.
    std::string transport_note() const;
    // The console's line: "# nccl 2.23.4: network IB (mlx5_0:1/IB ...), intra-host P2P/IPC, ...".
    std::string header_line() const;
    nlohmann::json to_json() const;

  private:
    NcclLogCapture* capture_;
    NcclLogFacts facts_;
    HostNetwork host_;
};

}  // namespace parbench

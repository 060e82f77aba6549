#include "cli/nccl_run_report.hpp"

namespace parbench {
namespace {

std::string listed(const std::map<std::string, int>& transports) {
    std::string text;
    for (const auto& [name, count] : transports) text += (text.empty() ? "" : ", ") + name + " x" + std::to_string(count);
    return text.empty() ? "-" : text;
}

}  // namespace

NcclRunReport::NcclRunReport(NcclLogCapture* capture) : capture_(capture) {
    if (capture_ != nullptr) host_ = read_host_network();
}

void NcclRunReport::read_initialisation() {
    if (capture_ != nullptr) merge_nccl_facts(facts_, parse_nccl_log(capture_->read_new()));
}

nlohmann::json NcclRunReport::point_choice(const std::string& collective) {
    if (capture_ == nullptr) return nullptr;
    const NcclLogFacts point = parse_nccl_log(capture_->read_new());
    merge_nccl_facts(facts_, point);
    if (!capture_->per_call()) return nullptr;
    const auto choice = choice_for(point.choices, collective);
    if (!choice) return nullptr;
    return {{"algorithm", choice->algorithm},
            {"protocol", choice->protocol},
            {"channels", choice->channels ? nlohmann::json(*choice->channels) : nlohmann::json(nullptr)},
            {"nccl_bytes", choice->bytes}};
}

std::vector<NcclWarning> NcclRunReport::warnings() const {
    return capture_ == nullptr ? std::vector<NcclWarning>{} : nccl_fallback_warnings(facts_, host_);
}

std::string NcclRunReport::transport_note() const {
    if (facts_.network == "Socket" || facts_.cross_host_transports.count("NET/Socket") > 0)
        return "NCCL ran across hosts over TCP sockets (NET/Socket)";
    for (const auto& [transport, count] : facts_.intra_host_transports)
        if (transport.rfind("SHM", 0) == 0) return "NCCL moved intra-host data through host memory (" + transport + ")";
    return {};
}

std::string NcclRunReport::header_line() const {
    if (capture_ == nullptr) return {};
    if (!capture_->capturing()) return "# nccl: " + capture_->reason();
    std::string line = "# nccl " + (facts_.version.empty() ? std::string("?") : facts_.version) + ": network " +
                       (facts_.network.empty() ? std::string("none (one host)") : facts_.network) +
                       "; intra-host " + listed(facts_.intra_host_transports) + "; cross-host " +
                       listed(facts_.cross_host_transports) + "; NVLS " +
                       (!facts_.nvls_available ? "not reported" : *facts_.nvls_available ? "available" : "not available");
    if (!capture_->per_call()) line += "; per-call algorithm and protocol: --nccl-choices";
    return line;
}

nlohmann::json NcclRunReport::to_json() const {
    if (capture_ == nullptr) return nullptr;
    nlohmann::json warnings = nlohmann::json::array();
    for (const NcclWarning& w : this->warnings()) warnings.push_back({{"kind", w.kind}, {"text", w.text}});
    nlohmann::json rdma = host_.rdma_devices;
    return {{"captured", capture_->capturing()},
            {"not_captured_reason", capture_->capturing() ? nlohmann::json(nullptr) : nlohmann::json(capture_->reason())},
            {"per_call", capture_->per_call()},
            {"version", facts_.version},
            {"environment", nccl_environment()},
            {"set_by_environment", facts_.set_by_environment},
            {"network", facts_.network},
            {"network_devices", facts_.network_devices},
            {"intra_host_transports", facts_.intra_host_transports},
            {"cross_host_transports", facts_.cross_host_transports},
            {"nvls_available", facts_.nvls_available ? nlohmann::json(*facts_.nvls_available) : nlohmann::json(nullptr)},
            {"host_rdma_devices", rdma},
            {"warnings", warnings}};
}

}  // namespace parbench

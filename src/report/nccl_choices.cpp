#include "report/nccl_choices.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <regex>
#include <sstream>

namespace parbench {
namespace {

// NCCL's numbering in the older line form (src/include/device.h: NCCL_ALGO_*, NCCL_PROTO_*).
constexpr std::array<const char*, 7> algorithm_numbers{"TREE",          "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
                                                       "NVLS",          "NVLS_TREE", "PAT"};
constexpr std::array<const char*, 3> protocol_numbers{"LL", "LL128", "SIMPLE"};

struct NcclName {
    const char* nccl;
    const char* parbench;
};
constexpr std::array<NcclName, 5> collective_names{{{"AllReduce", "allreduce"},
                                                    {"AllGather", "allgather"},
                                                    {"ReduceScatter", "reducescatter"},
                                                    {"Broadcast", "broadcast"},
                                                    {"Reduce", "reduce"}}};

std::string upper(std::string text) {
    for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return text;
}

// "RING" from "Ring", "RING" or "1".
std::string named(const std::string& token, const auto& numbers) {
    if (!token.empty() && std::all_of(token.begin(), token.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        const std::size_t index = std::stoul(token);
        return index < numbers.size() ? numbers[index] : "#" + token;
    }
    return upper(token);
}

// The message of a log line: what follows "NCCL INFO " (or the line itself when it has no prefix).
std::string message_of(const std::string& line) {
    const std::string marker = "NCCL INFO ";
    const std::size_t at = line.find(marker);
    std::string message = at == std::string::npos ? line : line.substr(at + marker.size());
    while (!message.empty() && (message.back() == '\r' || message.back() == ' ')) message.pop_back();
    return message;
}

// "P2P/IPC" from "P2P/IPC/read", "SHM/direct" from "SHM/direct/direct", "NET/IB" from
// "NET/IB/0/GDRDMA": the transport and its kind, without the device index and options.
std::string transport_of(const std::string& via) {
    const std::size_t first = via.find('/');
    if (first == std::string::npos) return via;
    const std::size_t second = via.find('/', first + 1);
    return via.substr(0, second);
}

void read_line(const std::string& line, NcclLogFacts& facts) {
    static const std::regex tuning(
        R"(^(?:(\w+): )?(\d+) Bytes -> Algo (\w+) proto (\w+)(?: channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\})?)");
    static const std::regex version(R"(^NCCL version (\S+))");
    static const std::regex environment(R"(^(NCCL_\w+) set by environment to (.*)$)");
    static const std::regex network(R"(^Using network (.+)$)");
    static const std::regex devices(R"(^NET/[^:]+ : Using (.+?)\s*(?:;\s*OOB.*)?$)");
    static const std::regex channel(R"(^Channel \d+/\d+ : .* via (\S+))");
    const std::string message = message_of(line);
    std::smatch match;
    if (std::regex_search(message, match, tuning)) {
        NcclChoice choice;
        const std::string name = match[1].str();
        for (const NcclName& c : collective_names)
            if (name == c.nccl) choice.collective = c.parbench;
        if (!name.empty() && choice.collective.empty()) return;  // a call parbench has no unit for
        choice.bytes = std::stoull(match[2].str());
        choice.algorithm = named(match[3].str(), algorithm_numbers);
        choice.protocol = named(match[4].str(), protocol_numbers);
        if (match[5].matched) choice.channels = std::stoi(match[6].str()) - std::stoi(match[5].str()) + 1;
        facts.choices.push_back(std::move(choice));
    } else if (std::regex_search(message, match, version)) {
        facts.version = match[1].str();
    } else if (std::regex_search(message, match, environment)) {
        facts.set_by_environment[match[1].str()] = match[2].str();
    } else if (std::regex_search(message, match, network)) {
        facts.network = match[1].str();
    } else if (std::regex_search(message, match, devices)) {
        std::istringstream list(match[1].str());
        std::string device;
        facts.network_devices.clear();
        while (list >> device) {
            if (device.front() == '[') device = device.substr(device.find(']') + 1);  // "[0]mlx5_0:1/IB"; "[RO]"
            if (!device.empty()) facts.network_devices.push_back(device);
        }
    } else if (message.rfind("NVLS multicast support is available", 0) == 0) {
        facts.nvls_available = true;
    } else if (message.rfind("NVLS multicast support is not available", 0) == 0) {
        if (!facts.nvls_available) facts.nvls_available = false;
    } else if (std::regex_search(message, match, channel)) {
        const std::string transport = transport_of(match[1].str());
        ++(transport.rfind("NET/", 0) == 0 || transport.rfind("COLLNET", 0) == 0 ? facts.cross_host_transports
                                                                                 : facts.intra_host_transports)[transport];
    }
}

std::string joined(const std::vector<std::string>& items) {
    std::string text;
    for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
    return text;
}

}  // namespace

NcclLogFacts parse_nccl_log(const std::string& text) {
    NcclLogFacts facts;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) read_line(line, facts);
    return facts;
}

void merge_nccl_facts(NcclLogFacts& facts, const NcclLogFacts& more) {
    if (!more.version.empty()) facts.version = more.version;
    if (!more.network.empty()) facts.network = more.network;
    if (!more.network_devices.empty()) facts.network_devices = more.network_devices;
    if (more.nvls_available && !(facts.nvls_available && *facts.nvls_available)) facts.nvls_available = more.nvls_available;
    for (const auto& [name, value] : more.set_by_environment) facts.set_by_environment[name] = value;
    for (const auto& [name, count] : more.intra_host_transports) facts.intra_host_transports[name] += count;
    for (const auto& [name, count] : more.cross_host_transports) facts.cross_host_transports[name] += count;
    facts.choices.insert(facts.choices.end(), more.choices.begin(), more.choices.end());
}

std::optional<NcclChoice> choice_for(const std::vector<NcclChoice>& choices, const std::string& collective) {
    for (auto it = choices.rbegin(); it != choices.rend(); ++it)
        if (it->collective == collective || it->collective.empty()) return *it;
    return std::nullopt;
}

HostNetwork read_host_network(const std::string& folder) {
    HostNetwork host;
    std::error_code error;
    std::vector<std::filesystem::path> devices;
    for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end; it.increment(error))
        devices.push_back(it->path());
    std::sort(devices.begin(), devices.end());
    for (const std::filesystem::path& device : devices) {
        // device/driver links to the kernel driver's folder: its name is the driver's.
        const std::filesystem::path driver = std::filesystem::read_symlink(device / "device" / "driver", error);
        const std::string driver_name = error ? std::string() : driver.filename().string();
        host.has_efa = host.has_efa || driver_name == "efa";
        host.rdma_devices.push_back(device.filename().string() + (driver_name.empty() ? "" : " (" + driver_name + ")"));
        error.clear();
    }
    return host;
}

std::vector<NcclWarning> nccl_fallback_warnings(const NcclLogFacts& facts, const HostNetwork& host) {
    std::vector<NcclWarning> warnings;
    const auto environment = [&](const std::string& name) -> std::string {
        const auto found = facts.set_by_environment.find(name);
        return found == facts.set_by_environment.end() ? std::string() : name + "=" + found->second;
    };

    const bool on_sockets = facts.network == "Socket" || facts.cross_host_transports.count("NET/Socket") > 0;
    if (on_sockets && !host.rdma_devices.empty()) {
        std::string causes;
        for (const char* name : {"NCCL_IB_DISABLE", "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_IB_HCA"})
            if (const std::string set = environment(name); !set.empty()) causes += (causes.empty() ? "" : ", ") + set;
        std::string text = "NCCL runs across hosts over TCP sockets (" +
                           std::string(facts.network == "Socket" ? "Using network Socket" : "connections via NET/Socket") +
                           ") though this host has RDMA devices (" + joined(host.rdma_devices) + "): ";
        if (!causes.empty())
            text += "the environment sets " + causes + "; unset it";
        else if (host.has_efa)
            text += "EFA needs the aws-ofi-nccl plugin (libnccl-net.so on LD_LIBRARY_PATH, or NCCL_NET_PLUGIN)";
        else
            text += "check that libibverbs and the RDMA drivers load in the job (NCCL_DEBUG_SUBSYS=INIT,NET says why "
                    "NET/IB was not used), and NCCL_IB_HCA names the devices";
        warnings.push_back({"sockets", text});
    }

    if (facts.nvls_available && *facts.nvls_available) {
        for (const NcclChoice& choice : facts.choices) {
            if (choice.collective != "allreduce" || choice.bytes < nvls_expected_from_bytes) continue;
            if (choice.algorithm == "NVLS" || choice.algorithm == "NVLS_TREE") continue;
            std::string causes;
            for (const char* name : {"NCCL_ALGO", "NCCL_NVLS_ENABLE"})
                if (const std::string set = environment(name); !set.empty()) causes += (causes.empty() ? "" : ", ") + set;
            warnings.push_back(
                {"nvls", "allreduce of " + std::to_string(choice.bytes) + " B ran on " + choice.algorithm + "/" +
                             choice.protocol + " though NVLS is available on this node: " +
                             (causes.empty() ? std::string("check that NCCL_ALGO does not exclude NVLS and that NCCL_NVLS_ENABLE is not 0")
                                             : "the environment sets " + causes + "; unset it to let NCCL pick NVLS")});
            break;  // one per run: the sizes above share the cause
        }
    }

    for (const auto& [transport, count] : facts.intra_host_transports) {
        if (transport.rfind("SHM", 0) != 0) continue;
        std::string causes;
        for (const char* name : {"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"})
            if (const std::string set = environment(name); !set.empty()) causes += (causes.empty() ? "" : ", ") + set;
        warnings.push_back({"shm", std::to_string(count) + " intra-host connection(s) go through host memory (" + transport +
                                       ") rather than GPU peer-to-peer: " +
                                       (causes.empty() ? std::string("the GPUs cannot reach each other directly (nvidia-smi "
                                                                     "topo -m; an IOMMU or ACS setting, or a container "
                                                                     "without the peers' devices)")
                                                       : "the environment sets " + causes + "; unset it")});
        break;
    }
    return warnings;
}

}  // namespace parbench

#include "report/inspector_log.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <sstream>
#include <utility>

#include "core/checked.hpp"
#include "core/error.hpp"

namespace parbench {
namespace {

struct NcclCollective {
    const char* nccl;
    const char* parbench;
    bool per_rank_size;  // coll_msg_size_bytes is one rank's share (the plugin multiplies by n_ranks)
};

// NCCL's names (the plugin's ncclFuncToString) and parbench's units. SendRecv is a grouped
// exchange, parbench's sendrecv ring the nearest point; Send and Recv alone have none.
constexpr std::array<NcclCollective, 6> collectives{{{"AllReduce", "allreduce", false},
                                                     {"AllGather", "allgather", true},
                                                     {"ReduceScatter", "reducescatter", true},
                                                     {"Broadcast", "broadcast", false},
                                                     {"Reduce", "reduce", false},
                                                     {"SendRecv", "sendrecv", false}}};

constexpr std::int64_t max_bytes = std::int64_t{1} << 53;  // exact in the double JSON numbers pass through
constexpr std::int64_t max_ranks = 1 << 24;

std::string first_line(const std::string& text) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line))
        if (line.find_first_not_of(" \t\r") != std::string::npos) return line;
    return {};
}

}  // namespace

bool looks_like_inspector_log(const std::string& text) {
    const nlohmann::json first = nlohmann::json::parse(first_line(text), nullptr, false);
    return first.is_object() && first.contains("coll_perf");
}

std::vector<InspectorRecord> parse_inspector_log(const std::string& text, const std::string& name) {
    std::vector<InspectorRecord> records;
    std::istringstream lines(text);
    std::string line;
    for (std::size_t number = 1; std::getline(lines, line); ++number) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = name + ":" + std::to_string(number);
        const nlohmann::json object = nlohmann::json::parse(line, nullptr, false);
        if (object.is_discarded())
            throw UsageError(where + ": not a JSON object; an NCCL Inspector log holds one record per line "
                                     "(NCCL_INSPECTOR_PROM_DUMP=0, the default)");
        const JsonFields fields(object, where);
        const JsonFields header = fields.object("header");
        const JsonFields perf = fields.object("coll_perf");
        const std::string nccl_name = perf.string("coll");
        const NcclCollective* unit = nullptr;
        for (const NcclCollective& c : collectives)
            if (nccl_name == c.nccl) unit = &c;
        if (unit == nullptr) continue;  // Send, Recv: halves of an exchange, no benchmark point

        InspectorRecord record;
        record.nccl_name = nccl_name;
        record.collective = unit->parbench;
        record.n_ranks = static_cast<int>(header.integer("n_ranks", 1, max_ranks));
        record.nnodes = static_cast<int>(header.integer("nnodes", 1, max_ranks));
        record.rank = static_cast<int>(header.integer("rank", 0, record.n_ranks - 1));
        record.communicator = header.optional_string("id").value_or("");
        record.message_bytes = static_cast<std::uint64_t>(perf.integer("coll_msg_size_bytes", 0, max_bytes));
        record.bytes = unit->per_rank_size
                           ? checked_product({record.message_bytes, static_cast<std::uint64_t>(record.n_ranks)},
                                             where + ": coll_msg_size_bytes x n_ranks", exact_in_double)
                           : record.message_bytes;
        record.exec_time_us = perf.number("coll_exec_time_us", 0.0, 1e15);
        record.algbw_gbps = perf.number("coll_algobw_gbs", 0.0, 1e9);
        record.busbw_gbps = perf.number("coll_busbw_gbs", 0.0, 1e9);
        record.timing_source = perf.optional_string("coll_timing_source").value_or("");
        record.sequence = static_cast<std::uint64_t>(perf.optional_integer("coll_sn", 0, max_bytes).value_or(0));
        if (fields.has("metadata")) record.host = fields.object("metadata").optional_string("hostname").value_or("");
        records.push_back(std::move(record));
    }
    return records;
}

}  // namespace parbench

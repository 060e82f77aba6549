#include "report/environment.hpp"

#include <algorithm>
#include <sstream>

namespace parbench {
namespace {

// "madvise" when every rank says it, else "mixed" (the by-rank array tells them apart).
std::string common_value(const std::vector<std::string>& by_rank) {
    if (by_rank.empty()) return "unknown";
    const bool same = std::all_of(by_rank.begin(), by_rank.end(), [&](const std::string& v) { return v == by_rank[0]; });
    return same ? by_rank.front() : "mixed";
}

std::string mebibytes(std::uint64_t bytes) {
    std::ostringstream text;
    text << static_cast<double>(bytes) / static_cast<double>(1 << 20);
    return text.str();
}

}  // namespace

std::string obtained_pages(const BufferPagesRecord& record) {
    if (record.requested.empty()) return "device memory";
    std::string obtained;
    for (std::size_t r = 0; r < record.probe_huge_bytes_by_rank.size(); ++r) {
        const std::optional<std::uint64_t>& huge = record.probe_huge_bytes_by_rank[r];
        if (!huge) return "unknown";
        const std::uint64_t capacity = record.probe_huge_capacity_by_rank.at(r);
        const std::string rank = *huge == 0 ? "normal" : *huge >= capacity ? "huge" : "partly huge";
        obtained = obtained.empty() || obtained == rank ? rank : "partly huge";
    }
    return obtained.empty() ? "unknown" : obtained;
}

void count_ranks_per_host(Environment& environment) {
    environment.hosts.clear();
    environment.ranks_per_host.clear();
    for (const std::string& host : environment.hosts_by_rank) {
        if (std::find(environment.hosts.begin(), environment.hosts.end(), host) == environment.hosts.end())
            environment.hosts.push_back(host);
        ++environment.ranks_per_host[host];
    }
}

nlohmann::json to_json(const Environment& environment) {
    nlohmann::json ranks_per_host = nlohmann::json::object();
    for (const auto& [host, ranks] : environment.ranks_per_host) ranks_per_host[host] = ranks;
    return {
        {"world_size", environment.world_size},
        {"launcher", environment.launcher},
        {"hosts", environment.hosts},
        {"ranks_per_host", ranks_per_host},
        {"hosts_by_rank", environment.hosts_by_rank},
        {"backend", environment.backend},
        {"device_kind", environment.device_kind},
        {"device", environment.devices.empty() ? std::string() : environment.devices.front()},
        {"devices", environment.devices},
        {"mpi_version", environment.mpi_version},
        {"cpu", environment.cpu},
        {"cpu_cores", environment.cpu_cores},
        {"cpu_kernels",
         {{"path", environment.cpu_kernels},
          {"forced", environment.cpu_kernels_forced},
          {"runnable", environment.cpu_kernels_runnable}}},
        {"blas", {{"library", environment.blas}, {"core", environment.blas_core}}},
        {"versions", environment.versions},
        {"buffer_pages", to_json(environment.buffer_pages)},
    };
}

BufferPagesRecord buffer_pages_record(const PageReadBack& read_back) {
    return {buffer_pages_name(read_back.requested), {read_back.thp.enabled},       {read_back.thp.defrag},
            read_back.probe_bytes,                  {read_back.probe_huge_capacity}, {read_back.probe_huge_bytes}};
}

nlohmann::json to_json(const BufferPagesRecord& record) {
    nlohmann::json huge = nlohmann::json::array();
    for (const auto& bytes : record.probe_huge_bytes_by_rank) huge.push_back(bytes ? nlohmann::json(*bytes) : nlohmann::json());
    return {
        {"requested", record.requested.empty() ? nlohmann::json() : nlohmann::json(record.requested)},
        {"obtained", obtained_pages(record)},
        {"thp_enabled", common_value(record.thp_enabled_by_rank)},
        {"thp_defrag", common_value(record.thp_defrag_by_rank)},
        {"thp_enabled_by_rank", record.thp_enabled_by_rank},
        {"thp_defrag_by_rank", record.thp_defrag_by_rank},
        {"probe_bytes", record.probe_bytes == 0 ? nlohmann::json() : nlohmann::json(record.probe_bytes)},
        {"probe_huge_capacity_by_rank", record.probe_huge_capacity_by_rank},
        {"probe_huge_bytes_by_rank", huge},
    };
}

std::string buffer_pages_line(const nlohmann::json& record) {
    if (!record.is_object() || !record.contains("obtained")) return "";
    const std::string obtained = record["obtained"].get<std::string>();
    const std::string thp = "THP " + record.value("thp_enabled", std::string("unknown")) + ", defrag " +
                            record.value("thp_defrag", std::string("unknown"));
    if (!record["requested"].is_string())
        return "# buffer pages: GPU memory (--buffer-pages applies to host buffers only); host " + thp;
    const std::string requested = record["requested"].get<std::string>();
    std::ostringstream line;
    line << "# buffer pages: " << requested << (requested == "huge" ? " (madvise from 2 MiB; " : " (plain allocation; ")
         << thp << "); obtained " << obtained;
    const nlohmann::json& huge = record["probe_huge_bytes_by_rank"];
    const nlohmann::json& capacity = record["probe_huge_capacity_by_rank"];
    if (obtained == "unknown") {
        line << " (a rank could not read /proc/self/smaps)";
    } else if (!huge.empty() && huge.size() == capacity.size()) {
        // "2" or "2-4" (MiB) over the ranks
        const auto span = [](const nlohmann::json& by_rank) {
            std::uint64_t least = by_rank[0].get<std::uint64_t>(), most = least;
            for (const nlohmann::json& bytes : by_rank) {
                least = std::min(least, bytes.get<std::uint64_t>());
                most = std::max(most, bytes.get<std::uint64_t>());
            }
            std::string text = mebibytes(least);
            if (most != least) text.append("-").append(mebibytes(most));
            return text;
        };
        line << " (a " << mebibytes(record["probe_bytes"].get<std::uint64_t>()) << " MiB probe: " << span(huge)
             << " MiB on huge pages of " << span(capacity) << " MiB they could back)";
    }
    return line.str();
}

std::string buffer_pages_line(const Environment& environment) {
    return buffer_pages_line(to_json(environment.buffer_pages));
}

bool oversubscribed(const Environment& environment) {
    if (environment.device_kind != "cpu") return false;
    return std::any_of(environment.ranks_per_host.begin(), environment.ranks_per_host.end(), [&](const auto& entry) {
        return environment.cpu_cores > 0 && static_cast<unsigned>(entry.second) > environment.cpu_cores;
    });
}

}  // namespace parbench

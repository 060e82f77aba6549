#include "report/console_table.hpp"

#include <iomanip>

namespace parbench {

void print_console_header(std::ostream& out, const nlohmann::json& frame, const std::string& method) {
    const nlohmann::json& environment = frame.at("environment");
    out << "# parbench " << frame["tool"]["version"].get<std::string>() << " (" << frame["tool"]["git"].get<std::string>()
        << "): " << frame["command"].get<std::string>() << '\n';
    out << "# ranks " << environment["world_size"].get<int>() << " on " << environment["hosts"].size() << " host(s):";
    for (const auto& [host, ranks] : environment["ranks_per_host"].items()) out << ' ' << host << " x" << ranks.get<int>();
    out << "; " << environment["cpu_cores"].get<unsigned>() << " cores on this host\n";
    out << "# backend " << environment["backend"].get<std::string>() << ", device "
        << environment["device_kind"].get<std::string>() << ": " << environment["device"].get<std::string>() << '\n';
    out << "# " << environment["mpi_version"].get<std::string>();
    for (const auto& [library, version] : environment["versions"].items()) out << ", " << library << ' ' << version.get<std::string>();
    out << '\n';
    out << "# method: " << method << '\n';
}

void print_console_columns(std::ostream& out, const std::string& collective) {
    out << "#\n# " << collective << '\n';
    out << "# " << std::setw(12) << "size" << std::setw(12) << "count" << std::setw(10) << "type" << std::setw(6)
        << "redop" << std::setw(5) << "root" << std::setw(5) << "inpl" << std::setw(12) << "time_med" << std::setw(12)
        << "time_p95" << std::setw(10) << "algbw" << std::setw(10) << "busbw" << std::setw(8) << "#wrong" << '\n';
    out << "# " << std::setw(12) << "(B)" << std::setw(12) << "(elements)" << std::setw(38) << "(us)"
        << std::setw(12) << "(us)" << std::setw(10) << "(GB/s)" << std::setw(10) << "(GB/s)" << '\n';
}

void print_console_row(std::ostream& out, const CollectiveResult& result) {
    out << "  " << std::setw(12) << result.bytes << std::setw(12) << result.count << std::setw(10)
        << dtype_name(result.dtype) << std::setw(6) << (result.op ? std::string(reduce_op_name(*result.op)) : "none")
        << std::setw(5) << (result.root ? std::to_string(*result.root) : "-") << std::setw(5)
        << (result.inplace ? "yes" : "no");
    if (result.skipped) {
        out << "  skipped: " << *result.skipped << '\n';
        return;
    }
    const auto flags = out.flags();
    out << std::fixed << std::setprecision(2) << std::setw(12) << result.time_us.median << std::setw(12)
        << result.time_us.p95 << std::setw(10) << result.algbw_gbps << std::setw(10) << result.busbw_gbps;
    out.flags(flags);
    out << std::setw(8) << (result.wrong ? std::to_string(*result.wrong) : "N/A") << '\n';
}

}  // namespace parbench

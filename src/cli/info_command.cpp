// `parbench info`: what a cluster is made of, before anything is measured on it. Each host
// is described once (by its first rank): CPU, cores and GPUs with the P2P matrix; rank 0
// gathers the descriptions and prints them, or writes them as JSON with --json.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/command.hpp"
#include "cli/launcher.hpp"
#include "cli/rank_agreement.hpp"
#include "cli/mpi_scope.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/mpi_session.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "core/version.hpp"
#include "device/cpu_device.hpp"
#include "device/cpu_kernels.hpp"
#include "device/gpu_inventory.hpp"

namespace parbench {
namespace {

nlohmann::json to_json(const GpuInventory& inventory) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuDescription& gpu : inventory.gpus)
        gpus.push_back({{"index", gpu.index},
                        {"name", gpu.name},
                        {"memory_bytes", gpu.memory_bytes},
                        {"pci_bus_id", gpu.pci_bus_id},
                        {"compute_capability", gpu.compute_capability}});
    const auto optional_text = [](const std::string& text) {
        return text.empty() ? nlohmann::json() : nlohmann::json(text);
    };
    return {{"built_with_cuda", inventory.built_with_cuda},
            {"unavailable_reason", optional_text(inventory.unavailable_reason)},
            {"cuda_driver", optional_text(inventory.cuda_driver)},
            {"cuda_runtime", optional_text(inventory.cuda_runtime)},
            {"nccl", optional_text(inventory.nccl)},
            {"devices", gpus},
            {"peer_access", inventory.peer_access}};
}

// The CPU ops' path on this host and what it could run (device/cpu_kernels.hpp), and OpenBLAS's kernels.
nlohmann::json describe_cpu_kernels() {
    const CpuKernelChoice choice = choose_cpu_kernels();
    std::vector<std::string> runnable;
    for (CpuKernels kernels : cpu_kernels_runnable()) runnable.emplace_back(cpu_kernels_name(kernels));
    const BlasLibrary blas = blas_library();
    return {{"path", cpu_kernels_name(choice.kernels)},
            {"forced", choice.forced},
            {"runnable", runnable},
            {"blas", {{"library", blas.config}, {"core", blas.core}}}};
}

nlohmann::json describe_this_host(const std::string& host) {
    return {{"name", host},
            {"cpu", cpu_model_name()},
            {"cpu_cores", std::thread::hardware_concurrency()},
            {"cpu_kernels", describe_cpu_kernels()},
            {"gpu", to_json(query_gpu_inventory())}};
}

// Each host's first rank contributes its description; rank 0 receives them in rank order.
// Collective over `control`. Empty on the other ranks.
std::vector<nlohmann::json> gather_host_descriptions(const MpiSession& session, Communicator& control) {
    const std::string host = session.hosts_by_rank()[static_cast<std::size_t>(session.world_rank())];
    const std::string mine = session.local_rank() == 0 ? describe_this_host(host).dump() : std::string();
    const std::uint64_t my_length = mine.size();
    std::uint64_t longest = 0;
    control.allreduce(&my_length, &longest, 1, DType::uint64, ReduceOp::max);
    std::string padded = mine;
    padded.resize(longest, '\0');
    std::vector<char> all(session.world_rank() == 0 ? longest * static_cast<std::size_t>(session.world_size()) : 0);
    control.gather(padded.data(), all.data(), longest, DType::uint8, 0);

    std::vector<nlohmann::json> hosts;
    for (int rank = 0; rank < session.world_size() && session.world_rank() == 0; ++rank) {
        const char* start = all.data() + longest * static_cast<std::size_t>(rank);
        const std::string text(start, std::find(start, start + longest, '\0'));
        if (!text.empty()) hosts.push_back(nlohmann::json::parse(text));
    }
    return hosts;
}

nlohmann::json info_document(const MpiSession& session, std::vector<nlohmann::json> hosts) {
    nlohmann::json ranks_per_host = nlohmann::json::object();
    for (nlohmann::json& host : hosts) {
        std::vector<int> ranks;
        for (int rank = 0; rank < session.world_size(); ++rank)
            if (session.hosts_by_rank()[static_cast<std::size_t>(rank)] == host["name"].get<std::string>())
                ranks.push_back(rank);
        ranks_per_host[host["name"].get<std::string>()] = ranks.size();
        host["ranks"] = ranks;
    }
    return {{"schema", "parbench.info/v1"},
            {"parbench", {{"version", tool_version}, {"git", git_revision()}}},
            {"mpi_version", session.library_version()},
            {"launcher", launcher_name()},
            {"world_size", session.world_size()},
            {"ranks_per_host", ranks_per_host},
            {"hosts", hosts}};
}

std::string gib(std::uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
    return text;
}

// "0-3" for consecutive ranks, "0,2,5" otherwise.
std::string rank_list(const std::vector<int>& ranks) {
    bool consecutive = true;
    for (std::size_t i = 1; i < ranks.size(); ++i) consecutive = consecutive && ranks[i] == ranks[i - 1] + 1;
    std::ostringstream text;
    if (consecutive && ranks.size() > 1) {
        text << ranks.front() << '-' << ranks.back();
        return text.str();
    }
    for (std::size_t i = 0; i < ranks.size(); ++i) text << (i == 0 ? "" : ",") << ranks[i];
    return text.str();
}

std::string right_aligned(const std::string& text, std::size_t width) {
    return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

void print_gpus(std::ostream& out, const nlohmann::json& gpu) {
    if (gpu["devices"].empty()) {
        out << "  GPU:  no GPU visible: " << gpu["unavailable_reason"].get<std::string>() << '\n';
        // The runtime and NCCL versions come from the CUDA plugin: absent when it did not load.
        if (gpu["built_with_cuda"].get<bool>() && gpu["cuda_runtime"].is_string())
            out << "        (CUDA runtime " << gpu["cuda_runtime"].get<std::string>() << ", NCCL "
                << gpu["nccl"].get<std::string>() << " built in)\n";
        return;
    }
    out << "  CUDA: driver " << gpu["cuda_driver"].get<std::string>() << ", runtime "
        << gpu["cuda_runtime"].get<std::string>() << "; NCCL " << gpu["nccl"].get<std::string>() << '\n';
    for (const auto& device : gpu["devices"])
        out << "  GPU " << device["index"].get<int>() << ": " << device["name"].get<std::string>() << ", "
            << gib(device["memory_bytes"].get<std::uint64_t>()) << ", PCI " << device["pci_bus_id"].get<std::string>()
            << ", compute capability " << device["compute_capability"].get<std::string>() << '\n';
    const auto& access = gpu["peer_access"];
    if (access.size() < 2) return;
    out << "  P2P access (Y: the row's GPU reaches the column's memory directly):\n      ";
    for (std::size_t b = 0; b < access.size(); ++b) out << right_aligned(std::to_string(b), 4);
    out << '\n';
    for (std::size_t a = 0; a < access.size(); ++a) {
        out << "    " << right_aligned(std::to_string(a), 2);
        for (std::size_t b = 0; b < access.size(); ++b)
            out << right_aligned(a == b ? "-" : access[a][b].get<bool>() ? "Y" : "N", 4);
        out << '\n';
    }
}

void print_info(std::ostream& out, const nlohmann::json& document) {
    out << "parbench " << document["parbench"]["version"].get<std::string>() << " ("
        << document["parbench"]["git"].get<std::string>() << ")\n";
    out << "MPI:    " << document["mpi_version"].get<std::string>() << '\n';
    out << "launcher: " << document["launcher"].get<std::string>() << '\n';
    const auto& hosts = document["hosts"];
    out << "ranks:  " << document["world_size"].get<int>() << " on " << hosts.size()
        << (hosts.size() == 1 ? " host" : " hosts");
    std::vector<int> per_host;
    for (const auto& entry : document["ranks_per_host"]) per_host.push_back(entry.get<int>());
    if (!per_host.empty() && std::all_of(per_host.begin(), per_host.end(), [&](int n) { return n == per_host[0]; }))
        out << ", " << per_host[0] << (per_host[0] == 1 ? " rank" : " ranks") << " per host";
    out << '\n';
    for (const auto& host : hosts) {
        const auto ranks = host["ranks"].get<std::vector<int>>();
        out << "\nhost " << host["name"].get<std::string>() << ": " << ranks.size()
            << (ranks.size() == 1 ? " rank (" : " ranks (") << rank_list(ranks) << ")\n";
        out << "  CPU:  " << host["cpu"].get<std::string>() << ", " << host["cpu_cores"].get<unsigned>()
            << " cores\n";
        const auto& kernels = host["cpu_kernels"];
        std::string runnable;
        for (const auto& path : kernels["runnable"])
            runnable += (runnable.empty() ? "" : ", ") + path.get<std::string>();
        out << "  CPU kernels: " << kernels["path"].get<std::string>()
            << (kernels["forced"].get<bool>() ? " (forced by PARBENCH_CPU_KERNELS)" : " (the widest this CPU runs)")
            << "; this CPU runs " << runnable << '\n';
        const auto& blas = kernels["blas"];
        out << "  BLAS: " << blas["library"].get<std::string>();
        if (!blas["core"].get<std::string>().empty()) out << "; kernels " << blas["core"].get<std::string>();
        out << '\n';
        print_gpus(out, host["gpu"]);
    }
}

class InfoCommand : public Command {
  public:
    std::string& json_path() { return json_path_; }

    // Through run_with_mpi like the measuring commands, so that a job whose ranks run info
    // beside another command is refused by its first agreement rather than left waiting.
    int run(Invocation& invocation) override {
        return run_with_mpi(invocation, nlohmann::json::object(), [&](const MpiSession& session, Communicator& control) {
            std::optional<std::string> path_error;
            if (session.world_rank() == 0 && !json_path_.empty()) {
                try {
                    check_writable(json_path_, "--json");
                } catch (const UsageError& error) {
                    path_error = error.what();
                }
            }
            // Checked on every rank before the gather: one host's describe_cpu_kernels() refusing a bad
            // PARBENCH_CPU_KERNELS would leave the others waiting in it.
            try {
                choose_cpu_kernels();
            } catch (const UsageError& error) {
                if (!path_error) path_error = error.what();
            }
            throw_if_any_rank_failed(control, path_error);

            std::vector<nlohmann::json> hosts = gather_host_descriptions(session, control);
            if (session.world_rank() != 0) return 0;
            const nlohmann::json document = info_document(session, std::move(hosts));
            print_info(std::cout, document);
            if (!json_path_.empty()) write_json_atomically(json_path_, document);
            return 0;
        });
    }

  private:
    std::string json_path_;
};

}  // namespace

std::unique_ptr<Command> add_info_command(CLI::App& app) {
    auto command = std::make_unique<InfoCommand>();
    CLI::App* sub = app.add_subcommand(
        "info", "Describe the hosts, ranks, CPUs, MPI and, when present, the GPUs, CUDA, NCCL and P2P access");
    sub->add_option("--json", command->json_path(), "Also write the description as JSON (schema parbench.info/v1)");
    return command;
}

}  // namespace parbench

// `parbench pairs`: the all-pairs link matrix, for finding the bad link or host of a cluster.
// Every pair of ranks (or of hosts, one rank each, with --by host) exchanges data with
// sendrecv in round-robin rounds (bench/pair_schedule.hpp); rank 0 prints the bandwidth and
// latency matrices for small counts and, for any count, the pairs below --flag-below of the
// median of their kind, naming both ranks and hosts (report/pair_matrix.hpp). As the
// collectives do, it checks memory before allocating, stops a hang with --timeout naming the
// rank, and rewrites its report after every round, so a run that stops keeps what it measured.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "bench/pair_bench.hpp"
#include "cli/buffer_pages_flag.hpp"
#include "cli/command.hpp"
#include "cli/job_environment.hpp"
#include "cli/job_watchdog.hpp"
#include "cli/memory_check.hpp"
#include "cli/mpi_scope.hpp"
#include "cli/rank_agreement.hpp"
#include "comm/backend.hpp"
#include "core/console.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "core/memory_budget.hpp"
#include "core/size_parse.hpp"
#include "report/kept_report.hpp"
#include "report/environment.hpp"
#include "report/pair_matrix.hpp"
#include "report/report_document.hpp"

namespace parbench {
namespace {

constexpr std::size_t largest_printed_matrix = 16;
// Exchanges per pair and size: a median settles within tens of samples, and every pair takes
// its turn (n ranks: n-1 rounds), so a count beyond this is a typo, or a run of days.
constexpr int most_exchanges = 1'000'000;

struct PairsOptions {
    std::string size = "64M";
    std::string latency_size = "8";
    std::string by = "rank";
    double flag_below = 0.8;
    int warmup = 2;
    int iters = 5;
    int latency_iters = 20;
    double timeout_s = 0.0;
    std::string json_path;
    std::string backend = "auto";
    std::optional<int> inject_starved_rank;
};

void check_exchanges(int count, const char* flag, int least) {
    if (count < least)
        throw UsageError(std::string(flag) + " must be at least " + std::to_string(least));
    if (count > most_exchanges)
        throw UsageError(std::string(flag) + " " + std::to_string(count) + ": at most " +
                         std::to_string(most_exchanges) +
                         " exchanges per pair; the median settles within tens, and every pair takes its turn "
                         "(n ranks: n-1 rounds), so this would run for days");
}

PairBenchOptions resolve(const PairsOptions& options) {
    PairBenchOptions resolved;
    resolved.bandwidth_bytes = parse_size(options.size, "--size");
    resolved.latency_bytes = parse_size(options.latency_size, "--latency-size");
    if (options.by != "rank" && options.by != "host")
        throw UsageError("--by '" + options.by + "': use rank (every pair of ranks) or host (one rank per host)");
    if (!(options.flag_below > 0.0 && options.flag_below <= 1.0))
        throw UsageError("--flag-below must be a fraction of the median in (0, 1], e.g. 0.8");
    check_exchanges(options.warmup, "--warmup", 0);
    check_exchanges(options.iters, "--iters", 1);
    check_exchanges(options.latency_iters, "--latency-iters", 1);
    if (!(std::isfinite(options.timeout_s) && options.timeout_s >= 0))
        throw UsageError("--timeout must be 0 (off) or a finite positive number of seconds");
    resolved.warmup = options.warmup;
    resolved.iters = options.iters;
    resolved.latency_iters = options.latency_iters;
    resolved.inject_starved_rank = options.inject_starved_rank;
    parse_backend(options.backend);
    return resolved;
}

// --by rank: every rank; --by host: each host's first rank.
std::vector<PairParticipant> choose_participants(const std::vector<std::string>& hosts_by_rank, bool by_host) {
    std::vector<PairParticipant> participants;
    for (std::size_t rank = 0; rank < hosts_by_rank.size(); ++rank) {
        const bool host_seen = std::any_of(participants.begin(), participants.end(),
                                           [&](const PairParticipant& p) { return p.host == hosts_by_rank[rank]; });
        if (!by_host || !host_seen) participants.push_back({static_cast<int>(rank), hosts_by_rank[rank]});
    }
    return participants;
}

class PairsCommand : public Command {
  public:
    PairsOptions& options() { return options_; }
    void validate() const override { resolve(options_); }

    int run(Invocation& invocation) override {
        const PairBenchOptions resolved = resolve(options_);
        return run_with_mpi(invocation, config_json(resolved), [&](const MpiSession& session, Communicator& control) {
            return measure(invocation, resolved, session, control);
        });
    }

  private:
    int measure(Invocation& invocation, const PairBenchOptions& resolved, const MpiSession& session,
                Communicator& control) {
        if (session.world_size() < 2)
            throw UsageError("pairs needs 2 or more ranks (it measures pairs); run it under mpirun -np 2 or more");
        const bool by_host = options_.by == "host";
        const std::vector<PairParticipant> participants = choose_participants(session.hosts_by_rank(), by_host);
        if (participants.size() < 2)
            throw UsageError("--by host needs 2 or more hosts; this job runs on 1 (use --by rank)");
        check_outputs_writable(control, {{options_.json_path, "--json"}});

        // Before the backend: a hang while it starts is watched too; the watchdog's thread
        // rewrites the report kept so far as partial as it ends the job.
        KeptReport kept(session.world_rank() == 0 ? options_.json_path : std::string());
        const auto watchdog = start_watchdog(options_.timeout_s, session, control,
                                             [&kept](const std::string& message) { kept.abandon(message); });
        watchdog->enter({"setup", "start-up", 0, 0});
        Backend backend = make_run_backend(invocation, parse_backend(options_.backend), session, control);
        throw_if_any_rank_failed(control,
                                 memory_refusal(resolved, participants.size(),
                                                run_memory_budgets(*backend.device, control, session.hosts_by_rank(),
                                                                   session.local_size())),
                                 session.hosts_by_rank());
        const Environment environment = collect_environment(session, *backend.device, *backend.comm, control);
        nlohmann::json report = report_frame("pairs", invocation.arguments, invocation.started_at, environment,
                                             config_json(resolved));
        if (session.world_rank() == 0) {
            print_header(std::cout, participants, resolved);
            write_line(std::cout, buffer_pages_line(environment));
            // Ranks that share a core wait for the CPU, not the link: every pair looks slow.
            if (oversubscribed(environment))
                write_line(std::cerr, "warning: more ranks than cores on a host: ranks share cores and busy-poll, so "
                                      "pairs measure the scheduler too and the CPU-bound diagnosis loses its "
                                      "reference; run at most one rank per core (or --by host)");
        }

        std::vector<int> ranks;
        for (const PairParticipant& p : participants) ranks.push_back(p.rank);
        const auto keep = [&](const PairMeasurements& so_far, RunStatus status, const std::string& reason) {
            const PairAnalysis analysis =
                flag_slow_pairs(so_far.bandwidth_gbps, so_far.latency_us, participants, options_.flag_below);
            report["results"] = nlohmann::json::array(
                {pairs_result_json(options_.by, resolved.bandwidth_bytes, resolved.latency_bytes, so_far.rounds,
                                   participants, so_far.bandwidth_gbps, so_far.latency_us, so_far.cpu_share,
                                   options_.flag_below, analysis)});
            if (status != RunStatus::partial) report["finished_at"] = utc_now_iso8601();
            kept.write(report, status, reason);
            return analysis;
        };
        const PairMeasurements measured =
            measure_pairs(*backend.comm, control, *backend.device, ranks, resolved, *watchdog,
                          [&](const PairMeasurements& so_far) {
                              if (so_far.rounds_measured < so_far.rounds)
                                  keep(so_far, RunStatus::partial,
                                       std::to_string(so_far.rounds_measured) + " of " + std::to_string(so_far.rounds) +
                                           " rounds measured (the run is going on, or it ended before the rest)");
                          });
        if (session.world_rank() != 0) return 0;

        const PairAnalysis analysis = keep(measured, RunStatus::complete, {});
        if (participants.size() <= largest_printed_matrix) {
            print_pair_matrix(std::cout, "bandwidth (GB/s) at " + std::to_string(resolved.bandwidth_bytes) + " B",
                              measured.bandwidth_gbps, participants, 3);
            print_pair_matrix(std::cout, "latency (us) at " + std::to_string(resolved.latency_bytes) + " B",
                              measured.latency_us, participants, 1);
        }
        print_flagged_pairs(std::cout, analysis, participants, options_.flag_below, measured.cpu_share);
        return 0;
    }

    // Before any buffer: the two exchange buffers (device memory) and the samples of one pair
    // and the matrices (host memory) against this rank's share of the memory they come from.
    std::optional<std::string> memory_refusal(const PairBenchOptions& resolved, std::size_t participants,
                                              const RunMemoryBudgets& budgets) const {
        const double buffers = 2.0 * static_cast<double>(std::max(resolved.bandwidth_bytes, resolved.latency_bytes));
        const double samples = 8.0 * static_cast<double>(std::max(resolved.iters, resolved.latency_iters));
        const double matrices = 2.0 * 8.0 * static_cast<double>(participants) * static_cast<double>(participants);
        const std::string size_flag = resolved.bandwidth_bytes >= resolved.latency_bytes
                                          ? "--size " + options_.size
                                          : "--latency-size " + options_.latency_size;
        return placed_memory_refusal(
            {{"send and receive buffers of one exchange", buffers, size_flag}},
            {{"timing samples and matrices", samples + matrices, "--iters " + std::to_string(resolved.iters)}},
            budgets.device, budgets.host, "lower it, or run fewer ranks per host");
    }

    nlohmann::json config_json(const PairBenchOptions& resolved) const {
        return {{"bytes", resolved.bandwidth_bytes}, {"latency_bytes", resolved.latency_bytes},
                {"by", options_.by},           {"flag_below", options_.flag_below},
                {"warmup", resolved.warmup},   {"iters", resolved.iters},
                {"latency_iters", resolved.latency_iters}, {"timeout_s", options_.timeout_s},
                {"backend_requested", options_.backend}};
    }

    void print_header(std::ostream& out, const std::vector<PairParticipant>& participants,
                      const PairBenchOptions& resolved) const {
        const std::size_t n = participants.size();
        out << "# parbench pairs: " << n << (options_.by == "host" ? " hosts (first rank of each)" : " ranks") << ", "
            << (n % 2 == 0 ? n - 1 : n) << " rounds of concurrent pairs; sendrecv of " << resolved.bandwidth_bytes
            << " B (" << resolved.iters << " samples) and " << resolved.latency_bytes << " B ("
            << resolved.latency_iters << " samples), medians, after " << resolved.warmup << " warm-up exchanges\n";
    }

    PairsOptions options_;
};

}  // namespace

std::unique_ptr<Command> add_pairs_command(CLI::App& app) {
    auto command = std::make_unique<PairsCommand>();
    PairsOptions& o = command->options();
    CLI::App* sub = app.add_subcommand("pairs", "Measure every pair of ranks (or hosts) with sendrecv: bandwidth and "
                                                "latency matrices, slow pairs flagged");
    sub->add_option("--size", o.size, "Bytes exchanged per bandwidth sample (binary suffixes K M G)")
        ->capture_default_str();
    sub->add_option("--latency-size", o.latency_size, "Bytes exchanged per latency sample")->capture_default_str();
    sub->add_option("--by", o.by, "rank (every pair of ranks) or host (the first rank of each host)")
        ->capture_default_str();
    sub->add_option("--flag-below", o.flag_below, "Flag pairs below this fraction of the median of their kind")
        ->capture_default_str();
    sub->add_option("-w,--warmup", o.warmup, "Untimed exchanges per pair and size")->capture_default_str();
    sub->add_option("-n,--iters", o.iters, "Timed exchanges per pair at --size")->capture_default_str();
    sub->add_option("--latency-iters", o.latency_iters, "Timed exchanges per pair at --latency-size")
        ->capture_default_str();
    sub->add_option("--json", o.json_path,
                    "Write the report as JSON (schema parbench.report/v1), rewritten after every round");
    add_buffer_pages_flag(*sub);
    sub->add_option("--backend", o.backend, "auto (NCCL when every rank sees a GPU), mpi or nccl")
        ->capture_default_str();
    sub->add_option("--timeout", o.timeout_s,
                    "Abort the job when an exchange or a round's barrier hangs this many seconds, naming the rank "
                    "(0: off)")
        ->capture_default_str();
    sub->add_option("--inject-cpu-starved", o.inject_starved_rank,
                    "Fault injection: this rank sleeps inside each timed exchange, as a CPU-throttled rank (tests the "
                    "diagnosis)")
        ->group("");  // fault injection, for the tests
    return command;
}

}  // namespace parbench

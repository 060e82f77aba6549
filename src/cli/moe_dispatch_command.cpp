// `parbench moe-dispatch`: MoE dispatch and combine as NCCL's ep_bench and DeepEP measure them
// (bench/moe_dispatch.hpp): route, dispatch, a stand-in expert, combine, check every combined
// token; each phase timed apart with the harness's method, its bytes split into intra-host and
// inter-host and counted both as moved and in ep_bench's convention, the slowest and fastest rank
// named, the imbalance of the routing stated. On the MPI backend (host memory).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <sstream>

#include "bench/moe_dispatch.hpp"
#include "bench/statistics.hpp"
#include "cli/command.hpp"
#include "cli/job_environment.hpp"
#include "cli/job_watchdog.hpp"
#include "cli/mpi_scope.hpp"
#include "cli/rank_agreement.hpp"
#include "comm/backend.hpp"
#include "core/console.hpp"
#include "core/error.hpp"
#include "report/kept_report.hpp"
#include "report/report_document.hpp"

namespace parbench {
namespace {

struct MoeOptions {
    int tokens = 512;
    int hidden = 2048;
    int topk = 4;
    int experts = 32;
    std::string skew = "uniform";
    std::uint64_t skew_seed = 1;
    std::string dispatch_dtype = "bfloat16";
    std::string combine_dtype = "bfloat16";
    std::optional<double> capacity;
    std::string expert = "identity";
    int warmup = 5;
    int iters = 20;
    bool check = true;
    double timeout_s = 0.0;
    std::string json_path;
};

DType dtype_flag(const std::string& text, const char* flag) {
    const auto type = parse_dtype(text);
    if (!type) throw UsageError(std::string(flag) + " '" + text + "': use bfloat16, float16 or float32");
    return *type;
}

MoeDispatchConfig resolve(const MoeOptions& o) {
    MoeDispatchConfig c;
    c.tokens = o.tokens;
    c.hidden = o.hidden;
    c.topk = o.topk;
    c.experts = o.experts;
    c.skew = parse_skew(o.skew, o.skew_seed);
    c.dispatch_type = dtype_flag(o.dispatch_dtype, "--dispatch-dtype");
    c.combine_type = dtype_flag(o.combine_dtype, "--combine-dtype");
    c.capacity = o.capacity;
    if (o.expert != "identity" && o.expert != "gemm")
        throw UsageError("--expert '" + o.expert + "': use identity (a scale) or gemm (a GEMM by a scaled identity)");
    c.gemm_expert = o.expert == "gemm";
    c.warmup = o.warmup;
    c.iters = o.iters;
    c.check = o.check;
    if (!(std::isfinite(o.timeout_s) && o.timeout_s >= 0))
        throw UsageError("--timeout must be 0 (off) or a finite positive number of seconds");
    check_moe_config(c, 1);  // what does not depend on the rank count; the rest once MPI runs
    return c;
}

nlohmann::json config_json(const MoeDispatchConfig& c, const MoeOptions& o) {
    return {{"tokens_per_rank", c.tokens},
            {"hidden", c.hidden},
            {"topk", c.topk},
            {"experts", c.experts},
            {"skew", skew_name(c.skew)},
            {"skew_seed", c.skew.seed},
            {"dispatch_dtype", dtype_name(c.dispatch_type)},
            {"combine_dtype", dtype_name(c.combine_type)},
            {"capacity", c.capacity ? nlohmann::json(*c.capacity) : nlohmann::json(nullptr)},
            {"expert", o.expert},
            {"warmup", c.warmup},
            {"iters", c.iters},
            {"check", c.check},
            {"timing", "per phase: barrier, start, phase, stop; a sample is the slowest rank's"},
            {"timeout_s", o.timeout_s}};
}

// Mean, min and max over ranks of a per-rank figure, with the ranks of the min and max.
nlohmann::json over_ranks(const std::vector<double>& values) {
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    return {{"mean", std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size())},
            {"min", *low},
            {"min_rank", low - values.begin()},
            {"max", *high},
            {"max_rank", high - values.begin()}};
}

struct PhaseRow {
    std::string phase;
    Summary time;
    int slowest = 0, fastest = 0;
    double slowest_us = 0.0, fastest_us = 0.0;
    nlohmann::json json;
    double send_intra = 0, send_inter = 0, receive_intra = 0, receive_inter = 0, ep_send = 0, ep_receive = 0;
};

// One phase's result: its times (the slowest rank's per iteration, then the statistics), every
// rank's median, and every rank's bytes and bandwidths.
PhaseRow phase_result(const std::string& phase, DType type, const RankTimes& times,
                      const std::vector<MoePhaseBytes>& bytes, const std::vector<std::string>& hosts,
                      std::optional<std::uint64_t> wrong) {
    PhaseRow row;
    row.phase = phase;
    const std::vector<double> samples = aggregate_samples(times, Aggregation::max);
    row.time = summarize(samples);
    const std::vector<RankSummary> ranks = per_rank_summaries(times);
    nlohmann::json per_rank = nlohmann::json::array();
    std::vector<double> send[3], receive[3], ep_send, ep_receive;  // total, intra, inter
    for (const RankSummary& r : ranks) {
        const MoePhaseBytes& b = bytes[static_cast<std::size_t>(r.rank)];
        // Bytes per microsecond is MB/s; / 1e3 is decimal GB/s, as ep_bench's bytes / 1e9 / s.
        const auto gbps = [&](std::uint64_t n) { return r.median_us > 0 ? static_cast<double>(n) / r.median_us / 1e3 : 0.0; };
        send[0].push_back(gbps(b.sent_intra + b.sent_inter));
        send[1].push_back(gbps(b.sent_intra));
        send[2].push_back(gbps(b.sent_inter));
        receive[0].push_back(gbps(b.received_intra + b.received_inter));
        receive[1].push_back(gbps(b.received_intra));
        receive[2].push_back(gbps(b.received_inter));
        ep_send.push_back(gbps(b.ep_sent));
        ep_receive.push_back(gbps(b.ep_received));
        per_rank.push_back({{"rank", r.rank},
                            {"host", hosts[static_cast<std::size_t>(r.rank)]},
                            {"median_us", r.median_us},
                            {"mean_us", r.mean_us},
                            {"bytes",
                             {{"sent_intra_host", b.sent_intra},
                              {"sent_inter_host", b.sent_inter},
                              {"received_intra_host", b.received_intra},
                              {"received_inter_host", b.received_inter},
                              {"ep_bench_sent", b.ep_sent},
                              {"ep_bench_sent_inter_host", b.ep_sent_inter},
                              {"ep_bench_received", b.ep_received},
                              {"ep_bench_received_inter_host", b.ep_received_inter}}}});
    }
    const auto slowest = std::max_element(ranks.begin(), ranks.end(),
                                          [](const RankSummary& a, const RankSummary& b) { return a.median_us < b.median_us; });
    const auto fastest = std::min_element(ranks.begin(), ranks.end(),
                                          [](const RankSummary& a, const RankSummary& b) { return a.median_us < b.median_us; });
    row.slowest = slowest->rank;
    row.slowest_us = slowest->median_us;
    row.fastest = fastest->rank;
    row.fastest_us = fastest->median_us;
    const auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };
    row.send_intra = mean(send[1]);
    row.send_inter = mean(send[2]);
    row.receive_intra = mean(receive[1]);
    row.receive_inter = mean(receive[2]);
    row.ep_send = mean(ep_send);
    row.ep_receive = mean(ep_receive);
    row.json = {{"moe_phase", phase},
                {"dtype", dtype_name(type)},
                {"aggregation", "max"},
                {"reported_statistic", "median"},
                {"reported_time_us", row.time.median},
                {"time_us",
                 {{"mean", row.time.mean}, {"median", row.time.median}, {"min", row.time.min}, {"max", row.time.max},
                  {"p95", row.time.p95}, {"stddev", row.time.stddev ? nlohmann::json(*row.time.stddev) : nlohmann::json(nullptr)}}},
                {"samples_us", samples},
                {"slowest_rank", {{"rank", row.slowest}, {"median_us", row.slowest_us}}},
                {"fastest_rank", {{"rank", row.fastest}, {"median_us", row.fastest_us}}},
                {"per_rank", per_rank},
                {"bandwidth_gbps",
                 {{"convention", "each rank's bytes / its own median time of the phase; mean, min and max over ranks"},
                  {"send", over_ranks(send[0])},
                  {"send_intra_host", over_ranks(send[1])},
                  {"send_inter_host", over_ranks(send[2])},
                  {"receive", over_ranks(receive[0])},
                  {"receive_intra_host", over_ranks(receive[1])},
                  {"receive_inter_host", over_ranks(receive[2])},
                  {"ep_bench_send", over_ranks(ep_send)},
                  {"ep_bench_receive", over_ranks(ep_receive)}}},
                {"wrong", wrong ? nlohmann::json(*wrong) : nlohmann::json(nullptr)}};
    nlohmann::json warnings = nlohmann::json::array();
    for (const Warning& w : sample_warning_list(samples)) warnings.push_back(w.text);
    row.json["warnings"] = warnings;
    return row;
}

// How unevenly the routing loads ranks and experts: the most against the mean.
nlohmann::json imbalance_json(const MoeRouting& routing, const std::vector<MoePhaseBytes>& dispatch, int experts) {
    std::vector<double> received;
    for (const MoePhaseBytes& b : dispatch) received.push_back(static_cast<double>(b.received_intra + b.received_inter));
    std::vector<double> load(static_cast<std::size_t>(experts), 0.0);
    for (int e : routing.expert)
        if (e >= 0) load[static_cast<std::size_t>(e)] += 1.0;
    const auto max_over_mean = [](const std::vector<double>& v) {
        const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
        return mean > 0 ? *std::max_element(v.begin(), v.end()) / mean : 1.0;
    };
    return {{"received_bytes_max_over_mean", max_over_mean(received)},
            {"busiest_rank", std::max_element(received.begin(), received.end()) - received.begin()},
            {"expert_load_max_over_mean", max_over_mean(load)},
            {"dropped_selections", routing.dropped},
            {"selections", routing.expert.size()}};
}

void print_rows(std::ostream& out, const std::vector<PhaseRow>& rows) {
    out << "#  phase      time_med       min       max  slowest (us)   fastest (us)   send intra/inter   recv intra/inter"
           "   ep_bench send/recv  #wrong\n";
    out << "#                 (us)      (us)      (us)                                 (GB/s, rank mean)  (GB/s, rank mean)"
           "   (GB/s, rank mean)\n";
    for (const PhaseRow& row : rows) {
        std::ostringstream line;
        line << std::fixed << std::setprecision(2) << "   " << std::left << std::setw(9) << row.phase << std::right
             << std::setw(11) << row.time.median << std::setw(10) << row.time.min << std::setw(10) << row.time.max
             << "   r" << row.slowest << " (" << row.slowest_us << ")   r" << row.fastest << " (" << row.fastest_us
             << ")   " << row.send_intra << '/' << row.send_inter << "   " << row.receive_intra << '/'
             << row.receive_inter << "   " << row.ep_send << '/' << row.ep_receive << "   "
             << (row.json["wrong"].is_null() ? std::string("N/A") : std::to_string(row.json["wrong"].get<std::uint64_t>()));
        out << line.str() << '\n';
    }
}

class MoeDispatchCommand : public Command {
  public:
    MoeOptions& options() { return options_; }
    void validate() const override { resolve(options_); }

    int run(Invocation& invocation) override {
        const MoeDispatchConfig config = resolve(options_);
        return run_with_mpi(invocation, config_json(config, options_), [&](const MpiSession& session, Communicator& control) {
            return measure(invocation, config, session, control);
        });
    }

  private:
    int measure(Invocation& invocation, const MoeDispatchConfig& config, const MpiSession& session, Communicator& control) {
        const int ranks = session.world_size();
        const int rank = session.world_rank();
        check_moe_config(config, ranks);
        check_outputs_writable(control, {{options_.json_path, "--json"}});
        KeptReport kept(rank == 0 ? options_.json_path : std::string());
        const auto watchdog = start_watchdog(options_.timeout_s, session, control,
                                             [&kept](const std::string& message) { kept.abandon(message); });
        watchdog->enter({"setup", "start-up", 0, 0});
        // Its buffers are std::vectors, plain allocations: what BufferPages::normal is, and what the record says.
        Backend backend = make_backend(BackendChoice::mpi, session, control, BufferPages::normal);
        const Environment environment = collect_environment(session, *backend.device, *backend.comm, control);
        nlohmann::json report =
            report_frame("moe-dispatch", invocation.arguments, invocation.started_at, environment, config_json(config, options_));
        const std::vector<std::string>& hosts = session.hosts_by_rank();
        const MoeRouting routing = route_moe_tokens(config, ranks);
        std::vector<MoePhaseBytes> dispatch_bytes, combine_bytes;
        const std::size_t hidden = static_cast<std::size_t>(config.hidden);
        for (int r = 0; r < ranks; ++r) {
            dispatch_bytes.push_back(moe_dispatch_bytes(routing, r, hosts, hidden * dtype_size(config.dispatch_type)));
            // The combine returns each dispatched row: sent and received swap, in the combine's type.
            const MoePhaseBytes b = moe_dispatch_bytes(routing, r, hosts, hidden * dtype_size(config.combine_type));
            combine_bytes.push_back({b.received_intra, b.received_inter, b.sent_intra, b.sent_inter, b.ep_received,
                                     b.ep_received_inter, b.ep_sent, b.ep_sent_inter});
        }
        if (rank == 0) {
            std::cout << "# parbench moe-dispatch: " << ranks << " ranks on " << environment.hosts.size() << " host(s); "
                      << config.tokens << " tokens per rank x hidden " << config.hidden << ", top-" << config.topk
                      << " of " << config.experts << " experts (" << routing.experts_per_rank << " per rank), skew "
                      << skew_name(config.skew) << " seed " << config.skew.seed << "; dispatch "
                      << dtype_name(config.dispatch_type) << ", combine " << dtype_name(config.combine_type) << "; expert "
                      << options_.expert << "; capacity "
                      << (config.capacity ? std::to_string(*config.capacity) : std::string("none")) << '\n'
                      << "# method: warm-up " << config.warmup << ", " << config.iters
                      << " samples; per phase barrier, start, phase, stop; a sample is the slowest rank's\n"
                      << std::flush;
        }
        watchdog->enter({"timed", "moe-dispatch", 0, 0});
        const MoeMeasurement measured = measure_moe_dispatch(config, routing, *backend.comm, control);
        watchdog->idle();
        if (rank != 0) return measured.wrong && *measured.wrong > 0 ? 1 : 0;

        const std::vector<PhaseRow> rows{
            phase_result("dispatch", config.dispatch_type, measured.dispatch, dispatch_bytes, hosts, measured.wrong),
            phase_result("combine", config.combine_type, measured.combine, combine_bytes, hosts, measured.wrong)};
        const nlohmann::json imbalance = imbalance_json(routing, dispatch_bytes, config.experts);
        nlohmann::json results = nlohmann::json::array();
        for (const PhaseRow& row : rows) {
            nlohmann::json entry = row.json;
            entry["imbalance"] = imbalance;
            entry["expert_us"] = over_ranks(measured.expert_us);
            results.push_back(entry);
        }
        report["results"] = results;
        report["finished_at"] = utc_now_iso8601();
        const bool failed = measured.wrong && *measured.wrong > 0;
        kept.write(report, failed ? RunStatus::failed : RunStatus::complete,
                   failed ? std::to_string(*measured.wrong) + " elements of the combined tokens were wrong" : std::string());
        print_rows(std::cout, rows);
        std::cout << std::fixed << std::setprecision(2) << "#   imbalance: received bytes max/mean "
                  << imbalance["received_bytes_max_over_mean"].get<double>() << " (rank "
                  << imbalance["busiest_rank"].get<long>() << "), expert load max/mean "
                  << imbalance["expert_load_max_over_mean"].get<double>() << ", " << routing.dropped
                  << " selections dropped; expert stand-in " << over_ranks(measured.expert_us)["max"].get<double>()
                  << " us (slowest rank's median)\n"
                  << std::flush;
        if (failed)
            write_line(std::cerr, "error: " + std::to_string(*measured.wrong) +
                                      " elements of the combined tokens were wrong: dispatch or combine moved incorrect data");
        return failed ? 1 : 0;
    }

    MoeOptions options_;
};

}  // namespace

std::unique_ptr<Command> add_moe_dispatch_command(CLI::App& app) {
    auto command = std::make_unique<MoeDispatchCommand>();
    MoeOptions& o = command->options();
    CLI::App* sub = app.add_subcommand(
        "moe-dispatch", "Time MoE dispatch and combine as ep_bench and DeepEP do: route, dispatch, expert, combine, check");
    sub->add_option("--tokens", o.tokens, "Tokens per rank")->capture_default_str();
    sub->add_option("--hidden", o.hidden, "Hidden size (elements per token)")->capture_default_str();
    sub->add_option("--topk", o.topk, "Experts per token")->capture_default_str();
    sub->add_option("--experts", o.experts, "Experts in all (a multiple of the ranks)")->capture_default_str();
    sub->add_option("--skew", o.skew, "Expert popularity: uniform, zipf:S or hot:K (as alltoallv's --skew, over experts)")
        ->capture_default_str();
    sub->add_option("--skew-seed", o.skew_seed, "Seed of the popularity order and of the routing")->capture_default_str();
    sub->add_option("--dispatch-dtype", o.dispatch_dtype, "Type the tokens travel in: bfloat16, float16, float32")
        ->capture_default_str();
    sub->add_option("--combine-dtype", o.combine_dtype, "Type the experts' outputs return in")->capture_default_str();
    sub->add_option("--capacity", o.capacity,
                    "Capacity factor: each expert keeps ceil(F x ranks x tokens x topk / experts) selections, the rest "
                    "are dropped (default: none dropped)");
    sub->add_option("--expert", o.expert, "Stand-in expert: identity (a scale) or gemm (cblas_sgemm)")->capture_default_str();
    sub->add_option("-w,--warmup", o.warmup, "Untimed rounds")->capture_default_str();
    sub->add_option("-n,--iters", o.iters, "Timed rounds")->capture_default_str();
    sub->add_flag("-c,--check,!--no-check", o.check, "Check every combined token after timing (the default)");
    sub->add_option("--timeout", o.timeout_s,
                    "Abort the job, naming the rank, when the measurement (every round) runs this many seconds (0: off)")
        ->capture_default_str();
    sub->add_option("--json", o.json_path, "Write the report as JSON (schema parbench.report/v1)");
    return command;
}

}  // namespace parbench

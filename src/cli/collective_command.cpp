// `parbench <collective>` and `parbench all`: sweep sizes, time each point with the
// harness, print rows as they finish and rewrite the report files after each one, so a
// crash keeps what was measured.
#include <cmath>
#include <iostream>
#include <optional>
#include <sstream>

#include "bench/collective_harness.hpp"
#include "bench/nvtx.hpp"
#include "bench/watchdog.hpp"
#include "cli/command.hpp"
#include "cli/job_watchdog.hpp"
#include "cli/mpi_scope.hpp"
#include "cli/rank_agreement.hpp"
#include "collectives/collective.hpp"
#include "comm/backend.hpp"
#include "comm/mpi_session.hpp"
#include "core/error.hpp"
#include "core/size_parse.hpp"
#include "report/collective_result.hpp"
#include "report/console_table.hpp"
#include "report/csv_report.hpp"
#include "report/environment.hpp"
#include "report/json_file.hpp"
#include "report/kept_report.hpp"
#include "report/report_document.hpp"

namespace parbench {
namespace {

struct CollectiveOptions {
    std::string command;  // a collective's name or "all"
    std::optional<std::string> size;
    std::string min_bytes = "32M";
    std::string max_bytes = "32M";
    double step_factor = 2.0;
    std::string dtype = "float32";
    std::string op = "sum";
    int root = 0;
    int warmup = 5;
    int iters = 20;
    std::string timing = "per-iter";
    int batch_size = 10;
    bool graph = false;
    bool inplace = false;
    bool check = false;
    std::string json_path;
    std::string csv_path;
    std::string backend = "auto";
    double timeout_s = 0.0;
    std::optional<int> inject_hang_rank;
};

// The options after parsing, in the types the harness takes.
struct ResolvedOptions {
    std::vector<const Collective*> collectives;
    std::vector<std::uint64_t> sizes;
    bool exact_size = false;  // --size on a single collective: refuse to round
    CollectiveParams params;
    TimingOptions timing;
    BackendChoice backend = BackendChoice::automatic;
};

ResolvedOptions resolve(const CollectiveOptions& options) {
    ResolvedOptions resolved;
    if (options.command == "all") {
        const auto all = all_collectives();
        resolved.collectives.assign(all.begin(), all.end());
    } else {
        resolved.collectives.push_back(find_collective(options.command));
    }
    const auto type = parse_dtype(options.dtype);
    if (!type) {
        std::string names;
        for (DType t : all_dtypes()) names += (names.empty() ? "" : ", ") + std::string(dtype_name(t));
        throw UsageError("--dtype '" + options.dtype + "': unknown type; use one of " + names);
    }
    const auto op = parse_reduce_op(options.op);
    if (!op) throw UsageError("--op '" + options.op + "': unknown operation; use sum, prod, max, min or avg");
    const bool any_reducing = std::any_of(resolved.collectives.begin(), resolved.collectives.end(),
                                          [](const Collective* c) { return c->reducing(); });
    if (any_reducing) {
        if (auto reason = reduce_op_unsupported_reason(*op, *type)) throw UsageError(*reason);
    }
    resolved.params = {*type, *op, options.root};
    if (options.root < 0) throw UsageError("--root " + std::to_string(options.root) + ": must be a rank, 0 or more");

    if (options.size) {
        resolved.sizes = {parse_size(*options.size, "--size")};
        resolved.exact_size = options.command != "all";
    } else {
        const auto min = parse_size(options.min_bytes, "-b/--min-bytes");
        const auto max = parse_size(options.max_bytes, "-e/--max-bytes");
        if (min > max)
            throw UsageError("-b/--min-bytes (" + options.min_bytes + ") is larger than -e/--max-bytes (" +
                             options.max_bytes + "); swap them or raise -e");
        if (min < max && options.step_factor <= 1.0)
            throw UsageError("-f/--step-factor must be above 1 for a sweep (e.g. -f 2)");
        resolved.sizes = geometric_sizes(min, max, options.step_factor);
    }

    if (options.warmup < 0) throw UsageError("--warmup must be 0 or more");
    if (options.iters < 1) throw UsageError("--iters must be at least 1");
    if (options.batch_size < 1) throw UsageError("--batch-size must be at least 1");
    if (options.timeout_s < 0) throw UsageError("--timeout must be 0 (off) or a positive number of seconds");
    if (options.timing == "per-iter")
        resolved.timing.mode = TimingMode::per_iteration;
    else if (options.timing == "batched")
        resolved.timing.mode = TimingMode::batched;
    else
        throw UsageError("--timing '" + options.timing + "': use per-iter or batched");
    resolved.timing.warmup = options.warmup;
    resolved.timing.iters = options.iters;
    resolved.timing.batch_size = options.batch_size;
    resolved.timing.graph = options.graph;
    resolved.timing.inject_hang_rank = options.inject_hang_rank;
    resolved.backend = parse_backend(options.backend);
    if (resolved.backend == BackendChoice::mpi && options.graph)
        throw UsageError("--graph replays CUDA graphs; it needs --backend nccl (or auto on GPUs)");
    return resolved;
}

nlohmann::json config_json(const CollectiveOptions& options, const ResolvedOptions& resolved) {
    nlohmann::json collectives = nlohmann::json::array();
    for (const Collective* c : resolved.collectives) collectives.push_back(c->name());
    return {
        {"collectives", collectives},
        {"sizes", resolved.sizes},
        {"dtype", dtype_name(resolved.params.type)},
        {"op", reduce_op_name(resolved.params.op)},
        {"root", resolved.params.root},
        {"inplace", options.inplace},
        {"check", options.check},
        {"warmup", resolved.timing.warmup},
        {"iters", resolved.timing.iters},
        {"timing", timing_mode_name(resolved.timing.mode)},
        {"batch_size", resolved.timing.mode == TimingMode::batched ? nlohmann::json(resolved.timing.batch_size)
                                                                    : nlohmann::json(nullptr)},
        {"graph", resolved.timing.graph},
        {"aggregation", "max over ranks per sample"},
        {"timeout_s", options.timeout_s},
        {"backend_requested", options.backend},
    };
}

std::string method_line(const ResolvedOptions& resolved) {
    std::ostringstream text;
    text << "warm-up " << resolved.timing.warmup << ", " << resolved.timing.iters << " samples per size; ";
    if (resolved.timing.mode == TimingMode::per_iteration)
        text << "per-iteration timing (barrier, start, op, device sync, stop)";
    else
        text << "batched timing (barrier, " << resolved.timing.batch_size << " ops, device sync; time / "
             << resolved.timing.batch_size << ")";
    if (resolved.timing.graph) text << " replaying a CUDA graph";
    text << "; each sample is the max over ranks; algbw = bytes / median";
    return text.str();
}

// Rounds a requested size down to whole per-rank slices of whole elements, as nccl-tests
// does; for an explicit --size on one collective, refuses instead and names valid sizes.
std::size_t element_count(const Collective& collective, std::uint64_t bytes, const CollectiveParams& params,
                          int nranks, bool exact) {
    const std::uint64_t unit = dtype_size(params.type) * collective.count_multiple(nranks);
    if (exact && bytes % unit != 0) {
        const std::uint64_t below = bytes / unit * unit;
        std::ostringstream text;
        text << "--size " << bytes << " B: " << collective.name() << " of " << dtype_name(params.type) << " over "
             << nranks << " ranks needs a multiple of " << unit << " bytes; the nearest valid sizes are ";
        if (below > 0) text << below << " and ";
        text << below + unit << " bytes";
        throw UsageError(text.str());
    }
    return static_cast<std::size_t>(bytes / unit * collective.count_multiple(nranks));
}

// The flags whose presence matters, not only their value: a flag that does not apply to the
// chosen collective or mode is refused rather than silently ignored.
struct GivenFlags {
    const CLI::Option* root = nullptr;
    const CLI::Option* op = nullptr;
    const CLI::Option* batch_size = nullptr;
    const CLI::Option* json = nullptr;
    const CLI::Option* csv = nullptr;
};

void check_flags_apply(const CollectiveOptions& options, const ResolvedOptions& resolved, const GivenFlags& given) {
    const auto any = [&](auto predicate) {
        return std::any_of(resolved.collectives.begin(), resolved.collectives.end(), predicate);
    };
    if (given.root->count() > 0 && !any([](const Collective* c) { return c->rooted(); }))
        throw UsageError("--root applies to rooted collectives (broadcast, reduce, gather, scatter); " +
                         options.command + " has no root: drop --root");
    if (given.op->count() > 0 && !any([](const Collective* c) { return c->reducing(); }))
        throw UsageError("--op applies to reducing collectives (allreduce, reducescatter, reduce); " + options.command +
                         " moves data without reducing: drop --op");
    if (given.batch_size->count() > 0 && resolved.timing.mode != TimingMode::batched)
        throw UsageError("--batch-size sets the ops per sample of batched timing; add --timing batched or drop "
                         "--batch-size");
    if (given.json->count() > 0 && options.json_path.empty())
        throw UsageError("--json needs a file name (e.g. --json report.json)");
    if (given.csv->count() > 0 && options.csv_path.empty())
        throw UsageError("--csv needs a file name (e.g. --csv report.csv)");
    if (!std::isfinite(options.timeout_s))
        throw UsageError("--timeout must be a finite number of seconds (0: off), not " + std::to_string(options.timeout_s));
    if (same_file(options.json_path, options.csv_path))
        throw UsageError("--json and --csv name the same file '" + options.json_path + "'; give two paths");
}

class CollectiveCommand : public Command {
  public:
    explicit CollectiveCommand(std::string name) { options_.command = std::move(name); }
    CollectiveOptions& options() { return options_; }
    GivenFlags& given() { return given_; }

    void validate() const override { check_flags_apply(options_, resolve(options_), given_); }

    int run(Invocation& invocation) override {
        const ResolvedOptions resolved = resolve(options_);
        return run_with_mpi(invocation, config_json(options_, resolved), [&](const MpiSession& session, Communicator& control) {
            return measure(invocation, resolved, session, control);
        });
    }

  private:
    int measure(Invocation& invocation, const ResolvedOptions& resolved, const MpiSession& session,
                Communicator& control) {
        const int rank = session.world_rank();
        const int nranks = session.world_size();
        if (resolved.params.root >= nranks)
            throw UsageError("--root " + std::to_string(resolved.params.root) + ": only " + std::to_string(nranks) +
                             " ranks; use 0.." + std::to_string(nranks - 1));
        check_outputs_writable(control, {{options_.json_path, "--json"}, {options_.csv_path, "--csv"}});
        // Refuse impossible exact sizes before any measuring.
        for (const Collective* collective : resolved.collectives)
            element_count(*collective, resolved.sizes.front(), resolved.params, nranks, resolved.exact_size);

        // Before the backend: a hang while it starts is watched too; the report kept so far is
        // rewritten as partial by the watchdog's thread as it ends the job.
        KeptReport kept(rank == 0 ? options_.json_path : std::string());
        const auto watchdog = start_watchdog(options_.timeout_s, session, control,
                                             [&kept](const std::string& message) { kept.abandon(message); });
        watchdog->enter({"setup", "start-up", 0, 0});
        Backend backend = make_backend(resolved.backend, session, control);
        if (resolved.timing.graph && !backend.device->is_gpu())
            throw UsageError("--graph replays CUDA graphs; this run uses " + backend.device->kind() +
                             " memory (no GPU visible)");
        const Environment environment = collect_environment(session, *backend.device, *backend.comm, control);
        nlohmann::json report = report_frame(options_.command, invocation.arguments, invocation.started_at, environment,
                                             config_json(options_, resolved));
        if (rank == 0) {
            print_console_header(std::cout, report, method_line(resolved));
            if (oversubscribed(environment))
                std::cerr << "warning: more ranks than cores on a host: ranks share cores and busy-poll, so times "
                             "measure the scheduler too; quote figures from runs with at most one rank per core\n";
        }

        CollectiveHarness harness(*backend.comm, control, *backend.device, resolved.timing, *watchdog);
        NvtxRange run_range("run " + options_.command);
        watchdog->idle();

        std::vector<CollectiveResult> results;
        const std::size_t points = resolved.collectives.size() * resolved.sizes.size();
        std::uint64_t total_wrong = 0;
        for (const Collective* collective : resolved.collectives) {
            if (rank == 0) print_console_columns(std::cout, std::string(collective->name()));
            for (std::uint64_t requested : resolved.sizes) {
                CollectiveResult result = measure_point(harness, *collective, requested, resolved, nranks);
                if (result.wrong) total_wrong += *result.wrong;
                results.push_back(result);
                if (rank == 0)
                    publish(results, report, result, kept,
                            std::to_string(results.size()) + " of " + std::to_string(points) +
                                " points measured (the run is going on, or it ended before the rest)");
            }
        }
        if (rank == 0) {
            report["finished_at"] = utc_now_iso8601();
            if (total_wrong > 0)
                write_reports(results, report, kept, RunStatus::failed,
                              std::to_string(total_wrong) + " elements were wrong (see wrong per point)");
            else
                write_reports(results, report, kept, RunStatus::complete);
            if (total_wrong > 0)
                std::cerr << ("error: " + std::to_string(total_wrong) +
                              " elements were wrong: the collective returned incorrect data (see #wrong)\n");
        }
        return total_wrong > 0 ? 1 : 0;
    }

    CollectiveResult measure_point(CollectiveHarness& harness, const Collective& collective, std::uint64_t requested,
                                   const ResolvedOptions& resolved, int nranks) const {
        CollectiveResult result;
        result.collective = std::string(collective.name());
        result.requested_bytes = requested;
        result.dtype = resolved.params.type;
        if (collective.reducing()) result.op = resolved.params.op;
        if (collective.rooted()) result.root = resolved.params.root;
        result.inplace = options_.inplace;
        result.bus_factor = collective.bus_factor(nranks);
        result.count = element_count(collective, requested, resolved.params, nranks, resolved.exact_size);
        result.bytes = result.count * dtype_size(resolved.params.type);
        if (result.count == 0) {
            result.skipped = "smaller than one " + std::string(dtype_name(resolved.params.type)) + " per rank";
            return result;
        }
        if (options_.inplace && !collective.supports_inplace()) {
            result.skipped = "no in-place form (sending and receiving one buffer at once would race)";
            return result;
        }
        PointSpec spec{&collective, result.count, resolved.params, options_.inplace, options_.check};
        PointMeasurement measurement = harness.measure(spec);
        result.samples_us = std::move(measurement.samples_us);
        result.wrong = measurement.wrong;
        derive_statistics(result);
        return result;
    }

    void publish(const std::vector<CollectiveResult>& results, nlohmann::json& report, const CollectiveResult& result,
                 KeptReport& kept, const std::string& progress) const {
        print_console_row(std::cout, result);
        for (const std::string& warning : result.warnings)
            std::cerr << "warning: " << result.collective << ' ' << result.bytes << " B: " << warning << '\n';
        write_reports(results, report, kept, RunStatus::partial, progress);
    }

    void write_reports(const std::vector<CollectiveResult>& results, nlohmann::json& report, KeptReport& kept,
                       RunStatus status, const std::string& reason = {}) const {
        nlohmann::json entries = nlohmann::json::array();
        for (const CollectiveResult& r : results) entries.push_back(to_json(r));
        report["results"] = std::move(entries);
        kept.write(report, status, reason);
        if (!options_.csv_path.empty()) write_text_atomically(options_.csv_path, to_csv(results));
    }

    CollectiveOptions options_;
    GivenFlags given_;
};

std::string description(const std::string& name) {
    if (name == "all") return "Time every collective in turn";
    if (name == "sendrecv") return "Time a ring of send/recv pairs (rank r sends to r+1, receives from r-1)";
    return "Time " + name;
}

}  // namespace

std::unique_ptr<Command> add_collective_command(CLI::App& app, const std::string& name) {
    auto command = std::make_unique<CollectiveCommand>(name);
    CollectiveOptions& o = command->options();
    CLI::App* sub = app.add_subcommand(name, description(name));
    auto* size = sub->add_option("--size", o.size, "One size, e.g. 100M (binary suffixes K M G)");
    auto* min = sub->add_option("-b,--min-bytes", o.min_bytes, "Smallest size of a sweep")->capture_default_str();
    auto* max = sub->add_option("-e,--max-bytes", o.max_bytes, "Largest size of a sweep")->capture_default_str();
    auto* factor = sub->add_option("-f,--step-factor", o.step_factor, "Multiply the size by this each step")
                       ->capture_default_str();
    size->excludes(min)->excludes(max)->excludes(factor);
    sub->add_option("--dtype", o.dtype, "float32 float64 float16 bfloat16 int8 uint8 int32 uint32 int64 uint64")
        ->capture_default_str();
    command->given().op = sub->add_option("--op", o.op, "Reduction: sum prod max min avg")->capture_default_str();
    command->given().root = sub->add_option("--root", o.root, "Root rank of broadcast, reduce, gather, scatter")->capture_default_str();
    sub->add_option("-w,--warmup", o.warmup, "Untimed iterations before timing")->capture_default_str();
    sub->add_option("-n,--iters", o.iters, "Timed samples per size")->capture_default_str();
    sub->add_option("--timing", o.timing, "per-iter (barrier + sync around each op) or batched")
        ->capture_default_str();
    command->given().batch_size = sub->add_option("--batch-size", o.batch_size, "Ops per sample in batched timing")->capture_default_str();
    sub->add_flag("--graph", o.graph, "Replay the op(s) of a sample from a CUDA graph (GPU only)");
    sub->add_flag("--inplace", o.inplace, "Receive into the send buffer (NCCL's in-place layout)");
    sub->add_flag("-c,--check", o.check, "Validate every element after timing; wrong data fails the run");
    command->given().json = sub->add_option("--json", o.json_path, "Write the report as JSON (schema parbench.report/v1)");
    command->given().csv = sub->add_option("--csv", o.csv_path, "Write the results as CSV");
    sub->add_option("--backend", o.backend, "auto (NCCL when every rank sees a GPU), mpi or nccl")
        ->capture_default_str();
    sub->add_option("--timeout", o.timeout_s, "Abort the job when one step hangs this many seconds (0: off)")
        ->capture_default_str();
    sub->add_option("--inject-hang", o.inject_hang_rank,
                    "Fault injection: this rank stops in its first timed iteration (tests --timeout)")
        ->group("Testing");
    return command;
}

}  // namespace parbench

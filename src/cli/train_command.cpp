// `parbench train`: end-to-end training steps of a real model under a parallel layout.
// Options are validated before MPI starts (including reading the model config); layout
// errors that need the world size are raised alike on every rank after it starts. The
// engine lives in train/; this file parses, builds the run, and reports.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <optional>
#include <thread>

#include "cli/buffer_pages_flag.hpp"
#include "cli/command.hpp"
#include "cli/divergence_reason.hpp"
#include "cli/iteration_log.hpp"
#include "cli/job_environment.hpp"
#include "cli/job_watchdog.hpp"
#include "cli/layout_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/mpi_scope.hpp"
#include "cli/rank_agreement.hpp"
#include "cli/stop_signals.hpp"
#include "comm/backend.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/mpi_session.hpp"
#include "core/console.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "core/memory_budget.hpp"
#include "report/environment.hpp"
#include "report/kept_report.hpp"
#include "report/report_document.hpp"
#include "train/matmuls.hpp"
#include "train/mesh.hpp"
#include "train/mesh_placement.hpp"
#include "train/metrics.hpp"
#include "train/model.hpp"
#include "train/ops/ops.hpp"
#include "train/pipeline/kept_trace.hpp"
#include "train/pipeline/pipeline_report.hpp"
#include "train/train_options.hpp"
#include "train/train_report.hpp"
#include "train/train_run.hpp"

namespace parbench {
namespace {

// The CPU peak is measured on every rank at once (so ranks that share cores measure their
// share); the report takes the mean.
PeakFlops resolve_peak(const TrainPlan& plan, const Device& device, Communicator& control) {
    if (plan.options.peak_tflops) return PeakFlops{*plan.options.peak_tflops, "--peak-tflops"};
    if (device.is_gpu()) {
        if (auto known = known_gpu_peak(device.name(), precision_name(plan.layout.precision))) return *known;
        return PeakFlops{std::nullopt, "unknown: " + device.name() + " is not in the peak table; give --peak-tflops"};
    }
    control.barrier();
    PeakFlops measured = measure_cpu_sgemm_peak();
    double tflops = *measured.tflops;
    control.allreduce(&tflops, &tflops, 1, DType::float64, ReduceOp::sum);
    measured.tflops = tflops / control.size();
    measured.source += ", mean over ranks";
    return measured;
}

// Ranks other than the first wait for the serial reference without busy-polling a core that
// the reference needs: a receive that is tested, with sleeps between tests.
int share_check_outcome(Communicator& control, bool passed) {
    int outcome = passed ? 1 : 0;
    if (control.rank() == 0) {
        for (int peer = 1; peer < control.size(); ++peer) control.send(&outcome, 1, DType::int32, peer);
        return outcome;
    }
    Request request = control.irecv(&outcome, 1, DType::int32, 0);
    while (!request.test()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return outcome;
}

// Flags of the run itself (not of what is trained), kept beside TrainOptions.
struct TrainRunOptions {
    double timeout_s = 0.0;
    bool quiet = false;
    int log_interval = 1;
};

// Watches every step of the run, prints Megatron's training log (cli/iteration_log.hpp), and
// rewrites the report after every timed step, so a run that dies keeps every step it finished.
class TrainProgress : public StepObserver {
  public:
    TrainProgress(const TrainPlan& plan, const MeshShape& shape, const PeakFlops& peak, Watchdog& watchdog,
                  KeptReport& kept, KeptTrace& trace, nlohmann::json report, bool speaks, int log_interval)
        : plan_(plan), log_(plan, shape.world(), peak, log_interval), watchdog_(watchdog), kept_(kept), trace_(trace),
          report_(std::move(report)), speaks_(speaks) {
        report_["progress"] = {{"steps", nlohmann::json::array()}};
    }

    void step_starting(int step, bool timed) override {
        watchdog_.enter({timed ? "timed" : "warm-up", "train step", 0, step});
    }

    void step_finished(const StepProgress& p) override {
        watchdog_.idle();
        const std::optional<std::string> line = log_.step_finished(p);
        if (speaks_ && line) std::cout << *line << std::flush;
        report_["progress"]["steps"].push_back(log_.step_json(p));
        if (!p.timed) return;
        ++timed_done_;
        kept_.write(report_, RunStatus::partial,
                    std::to_string(timed_done_) + " of " + std::to_string(plan_.options.steps) +
                        " timed steps measured (the run is going on, or it ended before the rest; see progress)");
    }

    void gathering_results() override { watchdog_.enter({"results", "gathering results", 0, 0}); }

    // The watchdog, when on, names the call each rank waits in.
    CallObserver* call_observer() override { return watchdog_.enabled() ? &watchdog_ : nullptr; }

    void timeline_gathered(const std::vector<std::vector<TimelineEvent>>& step_events_by_rank) override {
        trace_.append(step_events_by_rank);
    }

    const nlohmann::json& report() const { return report_; }

  private:
    const TrainPlan& plan_;
    IterationLog log_;
    Watchdog& watchdog_;
    KeptReport& kept_;
    KeptTrace& trace_;
    nlohmann::json report_;
    bool speaks_;
    int timed_done_ = 0;
};

// The serial reference of --check runs on rank 0 alone: each of its steps is progress.
class ReferenceProgress : public StepObserver {
  public:
    explicit ReferenceProgress(Watchdog& watchdog) : watchdog_(watchdog) {}
    void step_starting(int step, bool) override { watchdog_.enter({"check", "serial reference step", 0, step}); }

  private:
    Watchdog& watchdog_;
};

class TrainCommand : public Command {
  public:
    TrainOptions& options() { return options_; }

    void validate() const override { check_flags_apply(resolve_train_options(options_)); }

    bool needs_mpi() const override { return !options_.print_schedule; }

    int run(Invocation& invocation) override {
        const TrainPlan plan = resolve_train_options(options_);
        if (options_.print_schedule) {  // needs no MPI: the schedule is data
            print_schedule(std::cout, make_schedule(plan.layout.schedule, plan.layout.schedule_shape()));
            return 0;
        }
        const BackendChoice backend_choice = parse_backend(options_.backend);
        // Usage errors after MPI starts are raised alike on every rank and printed once
        // before any rank exits; other failures abort the job (cli/mpi_scope.hpp).
        return run_with_mpi(invocation, agreed_options(plan), [&](const MpiSession& session, Communicator& control) {
            return train(invocation, plan, backend_choice, session, control);
        });
    }

    const CLI::Option*& json_flag() { return json_flag_; }
    TrainRunOptions& run_options() { return run_options_; }
    const CLI::Option*& trace_flag() { return trace_flag_; }

  private:
    // Flags that do not apply, or outputs that collide, are refused rather than ignored.
    void check_flags_apply(const TrainPlan& plan) const {
        if (!std::isfinite(run_options_.timeout_s) || run_options_.timeout_s < 0)
            throw UsageError("--timeout must be 0 (off) or a positive finite number of seconds");
        if (run_options_.log_interval < 1) throw UsageError("--log-interval must be 1 or more steps");
        if (json_flag_->count() > 0 && options_.json_path.empty())
            throw UsageError("--json needs a file name (e.g. --json train.json)");
        if (trace_flag_->count() > 0 && options_.trace_path.empty())
            throw UsageError("--trace needs a file name (e.g. --trace timeline.json)");
        if (!options_.trace_path.empty() && plan.layout.pp < 2)
            throw UsageError("--trace writes the pipeline timeline, and this run has no pipeline; add --pp 2 or more, "
                             "or drop --trace (Nsight Systems shows any run's NVTX ranges)");
        if (same_file(options_.json_path, options_.trace_path))
            throw UsageError("--json and --trace name the same file '" + options_.json_path + "'; give two paths");
        if (options_.peak_tflops && !(std::isfinite(*options_.peak_tflops) && *options_.peak_tflops > 0))
            throw UsageError("--peak-tflops must be a positive finite number of TFLOP/s per rank");
    }

    // What every rank must agree on: the options, with the model config's content in place of
    // the name or path it was found by (a path may differ between nodes; the content may not).
    nlohmann::json agreed_options(const TrainPlan& plan) const {
        nlohmann::json options = to_json(options_);
        options.erase("model");
        std::ifstream file(plan.layout.model.source, std::ios::binary);
        const std::string content((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
        std::ostringstream digest;
        digest << "content digest " << std::hex << detail::fnv1a(content);
        options["model_content"] = labelled_value(digest.str(), plan.layout.model.source);
        options["timeout_s"] = run_options_.timeout_s;
        options["log_interval"] = run_options_.log_interval;
        options["json"] = options_.json_path;
        options["trace"] = options_.trace_path;
        return options;
    }

    int train(Invocation& invocation, const TrainPlan& requested, BackendChoice backend_choice,
              const MpiSession& session, Communicator& control) {
        const int rank = session.world_rank();
        const MeshShape shape = mesh_shape(resolve_train_plan(requested, session.world_size()).layout);
        check_outputs_writable(control, {{options_.json_path, "--json"}, {options_.trace_path, "--trace"}});

        KeptReport kept(rank == 0 ? options_.json_path : std::string());
        // The trace is kept like the report: a run the watchdog ends leaves the steps it traced.
        KeptTrace trace(rank == 0 ? options_.trace_path : std::string(), requested, shape);
        const auto watchdog = start_watchdog(run_options_.timeout_s, session, control,
                                             [&kept, &trace](const std::string& message) {
                                                 kept.abandon(message);
                                                 trace.abandon(message);
                                             });
        // Ctrl-C (SIGTERM from mpirun) or a SIGTERM of its own: the report and trace say so.
        const StopSignals stop(
            [&kept, &trace, rank](const std::string& signal) {
                const std::string reason = signal + " stopped the run";
                kept.abandon(reason);
                trace.abandon(reason);
                if (rank == 0) write_line(std::cerr, "error: " + reason + "; the report and trace keep the steps it finished");
            },
            stop_linger(rank));
        watchdog->enter({"setup", "start-up", 0, 0});
        Backend backend = make_run_backend(invocation, backend_choice, session, control);
        Device& device = *backend.device;
        std::unique_ptr<Ops> ops = make_ops(device);
        // The whole-sequence attention as this backend's kernels allow (theory/engine_attention.hpp).
        const TrainPlan plan = resolve_train_plan(requested, session.world_size(), ops->tiles_block_attention());
        check_backend_moe_overlap_1f1b(plan, device.is_gpu());
        // Once the device is known (a GPU's free memory is checked too), before the model is built:
        // what this rank will hold, by the theory its ledger is held to (cli/memory_check.hpp).
        const nlohmann::json memory_check = check_memory(plan, session, control, device);
        try {
            return train_watched(invocation, plan, shape, backend, *ops, session, control, *watchdog, kept, trace,
                                 memory_check);
        } catch (const UsageError&) {
            throw;  // raised alike on every rank, before any step: nothing was measured
        } catch (const std::exception& error) {
            // A failure on this rank ends the job (cli/mpi_scope.hpp): on rank 0, keep what it has
            // first, as partial (the run ended early; "failed" is for results that are wrong).
            const std::string reason = "rank " + std::to_string(rank) + " failed: " + error.what();
            kept.abandon(reason);
            trace.abandon(reason);
            throw;
        }
    }

    // Refuses, alike on every rank and before anything is allocated, a run some rank of which
    // would hold more than its share of the device's memory (the host's on CPU); returns what
    // each rank's check counted, for the report (where it is held to the ledger).
    static nlohmann::json check_memory(const TrainPlan& plan, const MpiSession& session, Communicator& control,
                                       const Device& device) {
        const int rank = session.world_rank();
        const RankMemory need = train_rank_memory(plan, rank);
        const std::optional<RankMemory> reference = train_reference_memory(plan);  // on every rank: refused alike
        const bool reference_larger = rank == 0 && reference && reference->total() > need.total();
        const RunMemoryBudgets budgets =
            run_memory_budgets(device, control, session.hosts_by_rank(), session.local_size());
        throw_if_any_rank_failed(
            control, train_memory_refusal(plan, reference_larger ? *reference : need, budgets, reference_larger),
            session.hosts_by_rank());
        double mine = need.total();
        std::vector<double> by_rank(static_cast<std::size_t>(control.size()));
        control.allgather(&mine, by_rank.data(), 1, DType::float64);
        const std::optional<MemoryBudget>& budget = budgets.device ? budgets.device : budgets.host;
        return {{"by_rank", by_rank},
                {"reference", reference ? nlohmann::json(reference->total()) : nlohmann::json(nullptr)},
                {"budget_per_rank", budget ? nlohmann::json(budget->per_rank_bytes) : nlohmann::json(nullptr)},
                {"budget_source", budget ? budget->source : "unknown: nothing refused"},
                {"method", "before allocating, each rank's buffers for its pipeline stage as theory/memory.hpp counts "
                           "them from the model, layout and flags (memory_predicted_bytes' formula), and under --check "
                           "the serial reference rank 0 runs after, against the rank's share of the device's (on a "
                           "CPU the host's) memory"}};
    }

    int train_watched(Invocation& invocation, const TrainPlan& plan, const MeshShape& shape, Backend& backend,
                      Ops& ops, const MpiSession& session, Communicator& control, Watchdog& watchdog,
                      KeptReport& kept, KeptTrace& trace, const nlohmann::json& memory_check) {
        const int rank = session.world_rank();
        Device& device = *backend.device;
        const Environment environment = collect_environment(session, device, *backend.comm, control);
        nlohmann::json config = to_json(options_);
        config["resolved"] = {{"dp", shape.dp}, {"tp", shape.tp}, {"pp", shape.pp}, {"cp", shape.cp}, {"seq_len", plan.layout.seq_len},
                              {"attention", attention_name(plan.layout.attention)},
                              {"model_source", plan.layout.model.source}};
        config["timeout_s"] = run_options_.timeout_s;
        config["log_interval"] = run_options_.log_interval;
        nlohmann::json report = report_frame("train", invocation.arguments, invocation.started_at, environment, config);
        const std::size_t parameters = model_parameter_layout(plan.layout.model, plan.layout.seq_len).total_numel();
        const bool speaks = rank == 0 && !run_options_.quiet;
        if (speaks) {
            print_train_header(std::cout, plan, shape, parameters, device.kind());
            write_line(std::cout, buffer_pages_line(environment));
            if (oversubscribed(environment))
                std::cerr << "warning: more ranks than cores on a host: ranks share cores and busy-poll, so step "
                             "times measure the scheduler too; quote figures from runs with at most one rank per core\n";
        }
        watchdog.enter({"setup", "peak FLOP/s", 0, 0});
        const PeakFlops peak = resolve_peak(plan, device, control);
        const MeshPlacement placement = place_mesh(shape, environment.hosts_by_rank);
        if (rank == 0 && placement.warning) write_line(std::cerr, "warning: " + *placement.warning);

        watchdog.enter({"setup", "model and scheme", 0, 0});
        Mesh mesh(*backend.comm, shape);
        TrainProgress progress(plan, shape, peak, watchdog, kept, trace, report, speaks, run_options_.log_interval);
        const TrainMeasurements measurements = train_or_name_buffers(plan, mesh, device, ops, control, progress);
        report = progress.report();
        if (measurements.diverged) return stop_diverged(measurements, plan.layout.model, report, kept, trace, rank);

        std::optional<CheckResult> check;
        int exit_status = 0;
        if (options_.check) {
            auto self = backend.comm->split(rank, 0);  // a world of one for the serial reference
            if (rank == 0) {
                Mesh serial_mesh(*self, MeshShape{});
                ReferenceProgress reference_progress(watchdog);
                check = check_against_serial_reference(plan, shape.dp, measurements, serial_mesh, device, ops, *self,
                                                       &reference_progress);
            } else {
                watchdog.enter({"check", "waiting for rank 0's serial reference", 0, 0});
            }
            exit_status = share_check_outcome(control, check && check->passed) == 1 ? 0 : 1;
        }
        watchdog.idle();

        if (rank == 0) {
            nlohmann::json result = train_result_json(
                TrainSummaryInputs{plan, shape, scheme_name(plan), measurements, peak, check});
            result["layout"]["placement"] = {{"group_hosts", placement.group_hosts},
                                             {"tp_crosses_hosts", placement.tp_crosses_hosts}};
            result["memory_checked_bytes"] = memory_check;
            if (!run_options_.quiet) {
                print_train_summary(std::cout, result);
                print_pipeline_summary(std::cout, result);
            }
            if (measurements.pipeline) trace.write(RunStatus::complete);
            if (!run_options_.quiet)
                for (const auto& warning : result["warnings"]) write_line(std::cerr, "warning: " + warning.get<std::string>());
            report["results"].push_back(result);
            report["finished_at"] = utc_now_iso8601();
            if (exit_status == 0)
                kept.write(report, RunStatus::complete);
            else
                kept.write(report, RunStatus::failed, "--check: the run differs from the serial reference");
            if (exit_status != 0)
                std::cerr << "error: --check: the parallel run differs from the serial reference beyond the "
                             "tolerance (see check in the report); the loss stayed finite, so the layout, not the "
                             "learning rate, is to blame\n";
        }
        return exit_status;
    }

    // An allocation that fails despite the estimate says what was being allocated and which flags size it.
    TrainMeasurements train_or_name_buffers(const TrainPlan& plan, Mesh& mesh, Device& device, Ops& ops,
                                            Communicator& control, TrainProgress& progress) const {
        try {
            return run_training(plan, mesh, device, ops, control, options_.check, &progress);
        } catch (const std::bad_alloc&) {
            throw RuntimeFailure("allocating the model's parameters, gradients, optimizer state or activations failed: "
                                 "out of memory; they are sized by --model and --global-batch (shard with --zero, --tp "
                                 "or --pp)");
        }
    }

    // A NaN or infinite loss stopped every rank at the same step: keep what was measured
    // (the report as failed, the pipeline trace) and say which step, and what it points to.
    int stop_diverged(const TrainMeasurements& measurements, const ModelConfig& model, nlohmann::json& report,
                      KeptReport& kept, KeptTrace& trace, int rank) const {
        if (rank != 0) return 1;
        const std::string reason = divergence_reason(*measurements.diverged, model, options_.lr, options_.check);
        report["finished_at"] = utc_now_iso8601();
        kept.write(report, RunStatus::failed, reason);
        if (measurements.pipeline) trace.write(RunStatus::failed, reason);
        std::cerr << ("error: " + reason + "\n") << std::flush;
        return 1;
    }

    TrainOptions options_;
    TrainRunOptions run_options_;
    const CLI::Option* json_flag_ = nullptr;
    const CLI::Option* trace_flag_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> add_train_command(CLI::App& app) {
    auto command = std::make_unique<TrainCommand>();
    TrainOptions& o = command->options();
    CLI::App* sub = app.add_subcommand("train", "Time end-to-end training steps of a model under a parallel layout");
    add_model_flags(*sub, o.model, o.seq);
    sub->add_option("--steps", o.steps, "Timed steps")->capture_default_str();
    sub->add_option("--warmup", o.warmup, "Untimed steps before timing")->capture_default_str();
    sub->add_option("--seed", o.seed, "Seed of parameters and data")->capture_default_str();
    sub->add_option("--lr", o.lr, "AdamW learning rate")->capture_default_str();
    add_layout_flags(*sub, o.layout);
    add_engine_layout_flags(*sub, o.layout);
    sub->add_flag("--print-schedule", o.print_schedule, "Print each pipeline rank's actions and exit (no MPI needed)");
    command->trace_flag() = sub->add_option("--trace", o.trace_path, "Write every rank's timeline as a Chrome trace (Perfetto) JSON FILE");
    sub->add_option("--peak-tflops", o.peak_tflops, "Peak TFLOP/s per rank for MFU (default: table or measured)");
    sub->add_flag("-c,--check", o.check, "Compare loss and final parameters with a serial run; fail if they differ");
    sub->add_option("--timeout", command->run_options().timeout_s,
                    "End the job when no rank progresses for this many seconds, naming the rank that hung (0: off)")
        ->capture_default_str();
    sub->add_option("--log-interval", command->run_options().log_interval, "Print a progress line every N steps")
        ->capture_default_str();
    sub->add_flag("-q,--quiet", command->run_options().quiet, "Print errors only (no header, progress or summary)");
    command->json_flag() = sub->add_option("--json", o.json_path, "Write the report as JSON (schema parbench.report/v1)");
    add_buffer_pages_flag(*sub);
    sub->add_option("--backend", o.backend, "auto (NCCL when every rank sees a GPU), mpi or nccl")
        ->capture_default_str();
    sub->add_option("--testing-slow-rank", o.testing_slow_rank,
                    "Testing: this world rank sleeps --testing-slow-ms in every step (shows the straggler report)")
        ->group("Testing");
    sub->add_option("--testing-slow-ms", o.testing_slow_ms, "Testing: the delay of --testing-slow-rank per step")
        ->capture_default_str()
        ->group("Testing");
    sub->add_option("--testing-misread-rank", o.testing_misread_rank,
                    "Testing: this world rank draws the samples one after its own (an error --check must find)")
        ->group("Testing");
    return command;
}

}  // namespace parbench

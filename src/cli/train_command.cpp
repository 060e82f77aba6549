// `parbench train`: end-to-end training steps of a real model under a parallel layout.
// Options are validated before MPI starts (including reading the model config); layout
// errors that need the world size are raised alike on every rank after it starts. The
// engine lives in train/; this file parses, builds the run, and reports.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <sstream>
#include <optional>
#include <thread>

#include "cli/buffer_pages_flag.hpp"
#include "cli/command.hpp"
#include "cli/job_environment.hpp"
#include "cli/job_watchdog.hpp"
#include "cli/memory_check.hpp"
#include "cli/mpi_scope.hpp"
#include "cli/rank_agreement.hpp"
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
#include "theory/tensor_parallel_cost.hpp"
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
PeakFlops resolve_peak(const TrainOptions& options, const Device& device, Communicator& control) {
    if (options.peak_tflops) return PeakFlops{*options.peak_tflops, "--peak-tflops"};
    if (device.is_gpu()) {
        if (auto known = known_gpu_peak(device.name(), options.precision)) return *known;
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

// One line per step (or per --log-interval), after Megatron-LM's training log: step, time,
// loss, throughput (tokens/s for GPT, samples/s for MLP) and model TFLOP/s per rank.
std::string progress_line(const TrainPlan& plan, int world, const StepProgress& p) {
    const bool gpt = plan.model.kind == ModelKind::gpt;
    const double seconds = p.time_ms / 1000.0;
    const double per_step = static_cast<double>(plan.options.global_batch) * (gpt ? plan.seq_len : 1);
    const double tflops = model_flops_per_step(plan.model, plan.options.global_batch, plan.seq_len) / seconds /
                          static_cast<double>(world) / 1e12;
    char line[256];
    std::snprintf(line, sizeof line, " step %*d/%d%s | step time %.2f ms | loss %.6g | %s %.1f | TFLOP/s per rank %.4f\n",
                  static_cast<int>(std::to_string(p.total_steps).size()), p.step + 1, p.total_steps,
                  p.timed ? "        " : " warm-up", p.time_ms, p.loss, gpt ? "tokens/s" : "samples/s",
                  per_step / seconds, tflops);
    return line;
}

// Before any allocation: the ledger's model states (ZeRO's 16 B/param, arXiv 1910.02054, for
// this rank's tensor and pipeline share) and the activations one micro-batch keeps (GPT:
// Korthikanti et al.'s per-layer formula plus the logits; MLP: its layer outputs) against
// this rank's share of the device's memory (the host's on CPU; a GPU's free memory shared by
// the ranks on it). An estimate, on the low side: it refuses only runs that cannot fit.
std::optional<std::string> train_memory_refusal(const TrainPlan& plan, const MeshShape& shape,
                                                const RunMemoryBudgets& budgets) {
    const TrainOptions& o = plan.options;
    const ModelConfig& m = plan.model;
    const double parameters = static_cast<double>(model_parameter_layout(m, plan.seq_len).total_numel());
    const double share = parameters / static_cast<double>(shape.tp * shape.pp);
    const TheoreticalMemory states =
        zero_theoretical_memory(static_cast<std::size_t>(share), shape.dp * shape.cp, o.zero);
    const int micro = std::max(o.global_batch / shape.dp / std::max(o.microbatches, 1), 1);
    const double layers_here = static_cast<double>(m.layers) / shape.pp;
    double activations = 0.0;
    if (m.kind == ModelKind::gpt) {
        // A context-parallel rank holds seq / cp tokens of each sequence.
        activations =
            gpt_activation_bytes_per_layer(m, plan.local_seq_len(), micro, plan.tensor_split(0)).bytes * layers_here +
            2.0 * micro * plan.local_seq_len() * (static_cast<double>(m.vocab) / shape.tp) * 4.0;
    } else {
        activations = 3.0 * micro * static_cast<double>(m.hidden) * layers_here * 4.0;
    }
    std::ostringstream model_flag, batch_flag;
    const char* scale = parameters >= 1e12 ? "T" : parameters >= 1e9 ? "B" : parameters >= 1e6 ? "M" : "K";
    const double unit = parameters >= 1e12 ? 1e12 : parameters >= 1e9 ? 1e9 : parameters >= 1e6 ? 1e6 : 1e3;
    model_flag << "--model " << o.model << " (" << std::setprecision(3) << parameters / unit << scale << " parameters)";
    batch_flag << "--global-batch " << o.global_batch;
    return placed_memory_refusal(
        {{"parameters, gradients and optimizer state", states.total(), model_flag.str()},
         {"activations of one micro-batch", activations, batch_flag.str()}},
        {}, budgets.device, budgets.host,
        "use a smaller model or batch, shard with --zero, --tp or --pp, or run fewer ranks per host");
}

// Flags of the run itself (not of what is trained), kept beside TrainOptions.
struct TrainRunOptions {
    double timeout_s = 0.0;
    bool quiet = false;
    int log_interval = 1;
};

// Watches every step of the run, prints Megatron's kind of progress line, and rewrites the
// report after every timed step, so a run that dies keeps every step it finished.
class TrainProgress : public StepObserver {
  public:
    TrainProgress(const TrainPlan& plan, const MeshShape& shape, Watchdog& watchdog, KeptReport& kept, KeptTrace& trace,
                  nlohmann::json report, bool speaks, int log_interval)
        : plan_(plan), world_(shape.world()), watchdog_(watchdog), kept_(kept), trace_(trace),
          report_(std::move(report)), speaks_(speaks), log_interval_(log_interval) {
        report_["progress"] = {{"steps", nlohmann::json::array()}};
    }

    void step_starting(int step, bool timed) override {
        watchdog_.enter({timed ? "timed" : "warm-up", "train step", 0, step});
    }

    void step_finished(const StepProgress& p) override {
        watchdog_.idle();
        if (speaks_ && ((p.step + 1) % log_interval_ == 0 || p.step + 1 == p.total_steps))
            std::cout << progress_line(plan_, world_, p) << std::flush;
        report_["progress"]["steps"].push_back(
            {{"step", p.step + 1}, {"timed", p.timed}, {"time_ms", p.time_ms}, {"loss", p.loss}});
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
    int world_;
    Watchdog& watchdog_;
    KeptReport& kept_;
    KeptTrace& trace_;
    nlohmann::json report_;
    bool speaks_;
    int log_interval_;
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

    void validate() const override {
        resolve_train_options(options_);
        check_flags_apply();
    }

    int run(Invocation& invocation) override {
        const TrainPlan plan = resolve_train_options(options_);
        if (options_.print_schedule) {  // needs no MPI: the schedule is data
            print_schedule(std::cout, make_schedule(plan.schedule, plan.schedule_shape()));
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
    void check_flags_apply() const {
        if (!std::isfinite(run_options_.timeout_s) || run_options_.timeout_s < 0)
            throw UsageError("--timeout must be 0 (off) or a positive finite number of seconds");
        if (run_options_.log_interval < 1) throw UsageError("--log-interval must be 1 or more steps");
        if (json_flag_->count() > 0 && options_.json_path.empty())
            throw UsageError("--json needs a file name (e.g. --json train.json)");
        if (trace_flag_->count() > 0 && options_.trace_path.empty())
            throw UsageError("--trace needs a file name (e.g. --trace timeline.json)");
        if (!options_.trace_path.empty() && options_.pp < 2)
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
        std::ifstream file(plan.model.source, std::ios::binary);
        const std::string content((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
        std::ostringstream digest;
        digest << "content digest " << std::hex << detail::fnv1a(content);
        options["model_content"] = labelled_value(digest.str(), plan.model.source);
        options["timeout_s"] = run_options_.timeout_s;
        options["log_interval"] = run_options_.log_interval;
        options["json"] = options_.json_path;
        options["trace"] = options_.trace_path;
        return options;
    }

    int train(Invocation& invocation, const TrainPlan& requested, BackendChoice backend_choice,
              const MpiSession& session, Communicator& control) {
        const int rank = session.world_rank();
        const MeshShape shape = resolve_layout(requested, session.world_size());
        check_outputs_writable(control, {{options_.json_path, "--json"}, {options_.trace_path, "--trace"}});

        KeptReport kept(rank == 0 ? options_.json_path : std::string());
        // The trace is kept like the report: a run the watchdog ends leaves the steps it traced.
        KeptTrace trace(rank == 0 ? options_.trace_path : std::string(), requested, shape);
        const auto watchdog = start_watchdog(run_options_.timeout_s, session, control,
                                             [&kept, &trace](const std::string& message) {
                                                 kept.abandon(message);
                                                 trace.abandon(message);
                                             });
        watchdog->enter({"setup", "start-up", 0, 0});
        Backend backend = make_run_backend(invocation, backend_choice, session, control);
        Device& device = *backend.device;
        std::unique_ptr<Ops> ops = make_ops(device);
        // The whole-sequence attention as this backend's kernels allow (theory/engine_attention.hpp).
        const TrainPlan plan = with_backend_attention(requested, ops->tiles_block_attention());
        check_backend_moe_overlap_1f1b(plan, device.is_gpu());
        // Once the device is known (a GPU's free memory is checked too), before the model is built.
        throw_if_any_rank_failed(
            control,
            train_memory_refusal(plan, shape,
                                 run_memory_budgets(device, control, session.hosts_by_rank(), session.local_size())),
            session.hosts_by_rank());
        try {
            return train_watched(invocation, plan, shape, backend, *ops, session, control, *watchdog, kept, trace);
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

    int train_watched(Invocation& invocation, const TrainPlan& plan, const MeshShape& shape, Backend& backend,
                      Ops& ops, const MpiSession& session, Communicator& control, Watchdog& watchdog,
                      KeptReport& kept, KeptTrace& trace) {
        const int rank = session.world_rank();
        Device& device = *backend.device;
        const Environment environment = collect_environment(session, device, *backend.comm, control);
        nlohmann::json config = to_json(options_);
        config["resolved"] = {{"dp", shape.dp}, {"tp", shape.tp}, {"pp", shape.pp}, {"cp", shape.cp}, {"seq_len", plan.seq_len},
                              {"attention", attention_name(plan.attention)},
                              {"model_source", plan.model.source}};
        config["timeout_s"] = run_options_.timeout_s;
        config["log_interval"] = run_options_.log_interval;
        nlohmann::json report = report_frame("train", invocation.arguments, invocation.started_at, environment, config);
        const std::size_t parameters = model_parameter_layout(plan.model, plan.seq_len).total_numel();
        const bool speaks = rank == 0 && !run_options_.quiet;
        if (speaks) {
            print_train_header(std::cout, plan, shape, parameters, device.kind());
            write_line(std::cout, buffer_pages_line(environment));
            if (oversubscribed(environment))
                std::cerr << "warning: more ranks than cores on a host: ranks share cores and busy-poll, so step "
                             "times measure the scheduler too; quote figures from runs with at most one rank per core\n";
        }
        watchdog.enter({"setup", "peak FLOP/s", 0, 0});
        const PeakFlops peak = resolve_peak(options_, device, control);
        const MeshPlacement placement = place_mesh(shape, environment.hosts_by_rank);
        if (rank == 0 && placement.warning) write_line(std::cerr, "warning: " + *placement.warning);

        watchdog.enter({"setup", "model and scheme", 0, 0});
        Mesh mesh(*backend.comm, shape);
        TrainProgress progress(plan, shape, watchdog, kept, trace, report, speaks, run_options_.log_interval);
        const TrainMeasurements measurements = train_or_name_buffers(plan, mesh, device, ops, control, progress);
        report = progress.report();
        if (measurements.diverged) return stop_diverged(measurements, report, kept, trace, rank);

        std::optional<CheckResult> check;
        int exit_status = 0;
        if (options_.check) {
            auto self = backend.comm->split(rank, 0);  // a world of one for the serial reference
            if (rank == 0) {
                Mesh serial_mesh(*self, MeshShape{});
                ReferenceProgress reference_progress(watchdog);
                const TrainMeasurements reference = run_training(serial_reference_plan(plan, shape.dp), serial_mesh, device, ops,
                                                                 *self, true, &reference_progress);
                check = compare_with_reference(measurements.loss, measurements.final_parameters, reference.loss,
                                               reference.final_parameters,
                                               model_parameter_layout(plan.model, plan.seq_len),
                                               parse_precision(options_.precision));
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
    // (the report as failed, the pipeline trace) and say which step, and what usually causes it.
    int stop_diverged(const TrainMeasurements& measurements, nlohmann::json& report, KeptReport& kept, KeptTrace& trace,
                      int rank) const {
        if (rank != 0) return 1;
        const StepProgress& at = *measurements.diverged;
        std::ostringstream reason;
        reason << "training diverged: the loss is " << (std::isnan(at.loss) ? "NaN" : at.loss > 0 ? "+inf" : "-inf")
               << " at step " << at.step + 1 << " of " << at.total_steps << " (" << (at.timed ? "timed" : "warm-up")
               << "); lower --lr (now " << options_.lr << "), the usual cause";
        if (options_.check) reason << "; --check did not compare with the serial run, since a diverged run differs from any";
        report["finished_at"] = utc_now_iso8601();
        kept.write(report, RunStatus::failed, reason.str());
        if (measurements.pipeline) trace.write(RunStatus::failed, reason.str());
        std::cerr << ("error: " + reason.str() + "\n") << std::flush;
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
    sub->add_option("--model", o.model, "Model NAME in configs/models (gpt-tiny, gpt-small, mlp-tiny, ...) or a PATH")
        ->capture_default_str();
    sub->add_option("--global-batch", o.global_batch, "Sequences (samples) per step over all ranks")
        ->capture_default_str();
    sub->add_option("--seq", o.seq, "Sequence length (default: the model's seq_len)");
    sub->add_option("--steps", o.steps, "Timed steps")->capture_default_str();
    sub->add_option("--warmup", o.warmup, "Untimed steps before timing")->capture_default_str();
    sub->add_option("--seed", o.seed, "Seed of parameters and data")->capture_default_str();
    sub->add_option("--lr", o.lr, "AdamW learning rate")->capture_default_str();
    sub->add_option("--dp", o.dp, "Data-parallel degree (default: the world size / (tp x pp))");
    sub->add_option("--tp", o.tp, "Tensor-parallel degree (Megatron-style split inside each layer)")
        ->capture_default_str();
    sub->add_flag("--sp", o.sp, "Sequence parallelism within the tensor-parallel group (needs --tp 2 or more)");
    sub->add_option("--tp-style", o.tp_style,
                    "megatron (column- then row-parallel pairs) or allgather (MLP: gather every layer's output)")
        ->capture_default_str();
    sub->add_option("--pp", o.pp, "Pipeline-parallel degree")->capture_default_str();
    sub->add_option("--schedule", o.schedule, "Pipeline schedule: gpipe, 1f1b, interleaved or zb-h1")
        ->capture_default_str();
    sub->add_option("--virtual-stages", o.virtual_stages, "Chunks per pipeline rank (--schedule interleaved)")
        ->capture_default_str();
    sub->add_option("--stage-layers", o.stage_layers, "Layers per (virtual) stage, e.g. 3,3,2 (default: balanced)")
        ->delimiter(',');
    sub->add_option("--p2p", o.p2p, "Pipeline transfers: nonblocking (isend/irecv) or blocking (send/recv)")
        ->capture_default_str();
    sub->add_flag("--print-schedule", o.print_schedule, "Print each pipeline rank's actions and exit (no MPI needed)");
    command->trace_flag() = sub->add_option("--trace", o.trace_path, "Write every rank's timeline as a Chrome trace (Perfetto) JSON FILE");
    sub->add_option("--zero", o.zero, "ZeRO stage: 0 (DDP), 1 (optimizer), 2 (+gradients), 3 (+parameters)")
        ->capture_default_str();
    sub->add_option("--microbatches", o.microbatches, "Micro-batches per rank per step (gradient accumulation)")
        ->capture_default_str();
    sub->add_option("--bucket-mb", o.bucket_mb,
                    "Gradient bucket size in MiB (default 25; ZeRO-2: min(25, 1/4 of the model's gradients))");
    sub->add_flag("--overlap", o.overlap, "Start each bucket's gradient collective as soon as it is ready");
    sub->add_flag("--prefetch", o.prefetch, "ZeRO-3: gather the next layer while computing this one");
    sub->add_option("--precision", o.precision, "fp32, or bf16 (bf16 matmuls, fp32 master weights)")->capture_default_str();
    sub->add_option("--recompute", o.recompute,
                    "Activation recompute: none, selective (the attention core) or full (each layer's forward)")
        ->capture_default_str();
    sub->add_option("--attention", o.attention,
                    "Whole-sequence attention: auto (block attention from 256 tokens where the backend's block "
                    "kernels tile: the CPU's; standard on a GPU), flash (block: the log-sum-exp kept, scores "
                    "recomputed in backward) or naive (standard: the T x T probabilities kept)")
        ->capture_default_str();
    sub->add_option("--cp", o.cp, "Context-parallel degree: ranks that split every sequence (gpt and llama models)")
        ->capture_default_str();
    sub->add_option("--cp-style", o.cp_style,
                    "Context-parallel attention: ring (K/V passed around the group, default) or alltoall (sequence "
                    "to heads and back)");
    sub->add_option("--cp-balance", o.cp_balance,
                    "Context-parallel causal balance: zigzag (two chunks per rank, one from each end, default) or "
                    "none (contiguous chunks)");
    sub->add_option("--ep", o.ep,
                    "Expert-parallel degree (MoE models): ranks that split the experts, carved from the dp x cp ranks "
                    "(ep consecutive ranks of the dp x cp group, Megatron-core's expert order tp-ep-dp-pp); tokens go to their "
                    "experts' ranks by alltoallv; each rank holds its E/ep experts' parameters, gradients and "
                    "optimizer states, their gradients averaged (ZeRO-sharded) over the dp x cp / ep ranks holding "
                    "the same experts")
        ->capture_default_str();
    sub->add_option("--etp", o.etp,
                    "The experts' tensor parallelism (MoE models): 1 (each tp rank holds its experts whole) or the tp "
                    "degree (each routed expert's first matrices column-parallel, its second row-parallel over the tp "
                    "group, the partial outputs all-reduced over it; Megatron-core's --expert-tensor-parallel-size)")
        ->capture_default_str();
    sub->add_option("--moe-expert-capacity-factor", o.moe_capacity_factor,
                    "MoE: each expert takes at most ceil(F x tokens x top_k / experts) of a micro-batch's "
                    "assignments, dropping those of lowest router weight (default: dropless)");
    sub->add_option("--moe-aux-loss-coeff", o.moe_aux_loss_coeff,
                    "MoE: weight of the Switch/GShard load-balancing loss (0: off)")
        ->capture_default_str();
    sub->add_option("--moe-router-bias-update-rate", o.moe_bias_update_rate,
                    "MoE: DeepSeek-V3's aux-loss-free balancing, each expert's bias moves so much per step "
                    "(0: off)")
        ->capture_default_str();
    sub->add_flag("--moe-a2a-overlap", o.moe_a2a_overlap,
                  "MoE with --ep: each dispatch and combine goes as two non-blocking alltoallv halves, one half's "
                  "all-to-all overlapping the other half's expert compute (and the shared experts'); results "
                  "bit-identical to the blocking exchange");
    sub->add_flag("--moe-a2a-overlap-1f1b", o.moe_a2a_overlap_1f1b,
                  "MoE with --ep and a --pp 1f1b pipeline: each steady-state forward runs paired with the next "
                  "backward (on two fibers of one thread), each posting its dispatch/combine non-blocking and "
                  "computing the other's pass while it travels (DualPipe's idea); results bit-identical to blocking");
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
    return command;
}

}  // namespace parbench

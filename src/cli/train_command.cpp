// `parbench train`: end-to-end training steps of a real model under a parallel layout.
// Options are validated before MPI starts (including reading the model config); layout
// errors that need the world size are raised alike on every rank after it starts. The
// engine lives in train/; this file parses, builds the run, and reports.
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <optional>
#include <thread>

#include "cli/command.hpp"
#include "cli/mpi_scope.hpp"
#include "cli/rank_agreement.hpp"
#include "comm/backend.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/mpi_session.hpp"
#include "core/error.hpp"
#include "report/environment.hpp"
#include "report/json_file.hpp"
#include "report/report_document.hpp"
#include "train/matmuls.hpp"
#include "train/mesh.hpp"
#include "train/metrics.hpp"
#include "train/model.hpp"
#include "train/ops/ops.hpp"
#include "train/train_options.hpp"
#include "train/pipeline/pipeline_report.hpp"
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
    const CLI::Option*& trace_flag() { return trace_flag_; }

  private:
    // Flags that do not apply, or outputs that collide, are refused rather than ignored.
    void check_flags_apply() const {
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
        digest << plan.model.name << " (content digest " << std::hex << detail::fnv1a(content) << ")";
        options["model_content"] = digest.str();
        options["json"] = options_.json_path;
        options["trace"] = options_.trace_path;
        return options;
    }

    int train(Invocation& invocation, const TrainPlan& plan, BackendChoice backend_choice, const MpiSession& session,
              Communicator& control) {
        const int rank = session.world_rank();
        const MeshShape shape = resolve_layout(plan, session.world_size());
        check_outputs_writable(control, {{options_.json_path, "--json"}, {options_.trace_path, "--trace"}});

        Backend backend = make_backend(backend_choice, session, control);
        Device& device = *backend.device;
        std::unique_ptr<Ops> ops = make_ops(device);
        const Environment environment = collect_environment(session, device, *backend.comm, control);
        nlohmann::json config = to_json(options_);
        config["resolved"] = {{"dp", shape.dp}, {"tp", shape.tp}, {"pp", shape.pp}, {"seq_len", plan.seq_len},
                              {"model_source", plan.model.source}};
        nlohmann::json report = report_frame("train", invocation.arguments, invocation.started_at, environment, config);
        const std::size_t parameters = model_parameter_layout(plan.model, plan.seq_len).total_numel();
        if (rank == 0) {
            print_train_header(std::cout, plan, shape, parameters, device.kind());
            if (oversubscribed(environment))
                std::cerr << "warning: more ranks than cores on a host: ranks share cores and busy-poll, so step "
                             "times measure the scheduler too; quote figures from runs with at most one rank per core\n";
        }
        const PeakFlops peak = resolve_peak(options_, device, control);

        Mesh mesh(*backend.comm, shape);
        const TrainMeasurements measurements = run_training(plan, mesh, device, *ops, control, options_.check);

        std::optional<CheckResult> check;
        int exit_status = 0;
        if (options_.check) {
            auto self = backend.comm->split(rank, 0);  // a world of one for the serial reference
            if (rank == 0) {
                Mesh serial_mesh(*self, MeshShape{});
                const TrainMeasurements reference =
                    run_training(serial_reference_plan(plan), serial_mesh, device, *ops, *self, true);
                check = compare_with_reference(measurements.loss, measurements.final_parameters, reference.loss,
                                               reference.final_parameters,
                                               model_parameter_layout(plan.model, plan.seq_len),
                                               parse_precision(options_.precision));
            }
            exit_status = share_check_outcome(control, check && check->passed) == 1 ? 0 : 1;
        }

        if (rank == 0) {
            const nlohmann::json result = train_result_json(
                TrainSummaryInputs{plan, shape, scheme_name(plan), measurements, peak, check});
            print_train_summary(std::cout, result);
            print_pipeline_summary(std::cout, result);
            if (measurements.pipeline && !options_.trace_path.empty())
                write_json_atomically(options_.trace_path, pipeline_trace_json(plan, shape, *measurements.pipeline));
            for (const auto& warning : result["warnings"]) std::cerr << "warning: " << warning.get<std::string>() << '\n';
            report["results"].push_back(result);
            report["finished_at"] = utc_now_iso8601();
            if (!options_.json_path.empty()) write_json_atomically(options_.json_path, report);
            if (exit_status != 0)
                std::cerr << "error: --check: the parallel run differs from the serial reference beyond the "
                             "tolerance (see check in the report)\n";
        }
        return exit_status;
    }

    TrainOptions options_;
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
    sub->add_option("--peak-tflops", o.peak_tflops, "Peak TFLOP/s per rank for MFU (default: table or measured)");
    sub->add_flag("-c,--check", o.check, "Compare loss and final parameters with a serial run; fail if they differ");
    command->json_flag() = sub->add_option("--json", o.json_path, "Write the report as JSON (schema parbench.report/v1)");
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

// `parbench plan`: memory, traffic, bubble and step time of a model and layout on a cluster,
// from formulas and parbench's own measurements (no MPI; src/plan/). One layout from train's
// layout flags, or --search over every layout that divides the GPUs and the model.
#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/command.hpp"
#include "cli/layout_flags.hpp"
#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "plan/global_batch.hpp"
#include "plan/layout_search.hpp"
#include "plan/moe_plan.hpp"
#include "plan/plan_output.hpp"
#include "theory/engine_defaults.hpp"
#include "theory/layout.hpp"
#include "theory/model_layout.hpp"
#include "theory/model_shape.hpp"
#include "theory/moe_work.hpp"

namespace parbench {
namespace {

// The ranges of plan's own flags (the layout's are layout_limits', the model's sizes
// model_limits', the cluster's cluster_limits'): beyond any job run, and small enough that every
// product plan forms is exact.
constexpr int max_top = 10000;
constexpr double max_pass_cost = 1e9;
constexpr double max_moe_imbalance = 1e6;

// A plan with no layout that fits in memory ends with this status, as compare's regression does.
constexpr int does_not_fit_exit_code = 3;

// --precision when not given: under --states parbench the plan is of parbench's own train, so
// it takes train's default (theory/engine_defaults.hpp); the frameworks' conventions (zero,
// megatron) are of bf16 mixed-precision runs, and so is a plan with neither flag (whose
// --states then follows from the precision: default_states).
std::string default_precision(const std::optional<std::string>& states) {
    return states && *states == "parbench" ? engine_default_precision : "bf16";
}

std::vector<int> parse_int_list(const std::string& text, const std::string& flag) {
    std::vector<int> values;
    std::stringstream stream(text);
    std::string item;
    while (std::getline(stream, item, ',')) {
        try {
            std::size_t used = 0;
            const int value = std::stoi(item, &used);
            if (used != item.size() || value < 1 || value > layout_limits::max_microbatches) throw std::invalid_argument(item);
            values.push_back(value);
        } catch (const std::exception&) {
            throw UsageError(flag + " '" + text + "': give integers from 1 to " + std::to_string(layout_limits::max_microbatches) +
                             " separated by commas, e.g. 1,2,4,8");
        }
    }
    if (values.empty()) throw UsageError(flag + ": give at least one value");
    if (values.size() > 64) throw UsageError(flag + ": give at most 64 values");
    return values;
}

class PlanCommand : public Command {
  public:
    ModelFlags model;
    std::optional<int> gpus;
    int gpus_per_host = 8;
    std::string device = "H100";
    std::string cluster_path;
    std::optional<int> cores_per_host;
    bool allow_cross_host_tp = false;
    LayoutFlags layout;  // cli/layout_flags.hpp: the flags train takes too
    std::optional<std::string> states;  // default: default_states()
    bool no_reshard = false, hybrid_shard = false;
    std::string pass_costs;
    std::optional<double> efficiency;
    std::string gemm_curve;
    std::vector<std::string> calibrate;
    std::string calibrate_compute;
    std::vector<std::string> calibrate_compute_busy;
    std::optional<double> moe_imbalance;
    bool search = false;
    int top = 10;
    std::optional<std::string> microbatch_list;  // default: SearchSpace's, extended to the batch
    bool fp8 = false;                            // plan/device_compute.hpp
    bool tp_comm_shared_sms = false;             // plan/layout_plan.hpp, tp_comm_sm_margin
    bool eager = false;                          // plan/layout_plan.hpp eager_elementwise
    std::string json_path;
    bool markdown = false;

    void validate() const override {
        check_flag_ranges();
        // A rate below a thousandth of peak is a typo, not a device, and a small enough one
        // overflows the step time to inf (plan.property found 1e-300).
        if (efficiency && !(*efficiency >= 1e-3 && *efficiency <= 1.0))
            throw UsageError("--efficiency must be in [0.001, 1], the fraction of the device's peak a step sustains (e.g. 0.5)");
        if (!gemm_curve.empty() && efficiency)
            throw UsageError("--gemm-curve models compute from each GEMM's shape; drop --efficiency, which gives one "
                             "rate instead");
        if (!json_path.empty()) check_writable(json_path, "--json");
        if (moe_imbalance && !(*moe_imbalance >= 1.0 && *moe_imbalance <= max_moe_imbalance))
            throw UsageError("--moe-imbalance " + std::to_string(*moe_imbalance) + ": give the max / mean tokens an "
                             "expert-parallel rank receives, 1 (balanced) or more, as `parbench alltoallv --skew` reports it");
    }

    bool needs_mpi() const override { return false; }

    // The stages, top to bottom: the cluster, the compute rate, the inputs the outputs quote, the
    // collective fits and pass costs, the layout (or the search's base), then the prediction(s)
    // and their report.
    int run(Invocation& invocation) override {
        const ResolvedModel resolved = resolve_plan_model(model);
        ClusterSpec cluster = resolve_cluster();
        const Precision run_precision = parse_precision(layout.precision.value_or(default_precision(states)));
        PlanContext context = resolve_compute(resolved.config, run_precision, cluster);
        PlanInputs inputs = describe_inputs(resolved, context);
        add_collective_fits(context, inputs);
        add_pass_costs(context, inputs);
        const PlanLayout base = base_layout(resolved.config, run_precision, cluster);
        inputs.batch = to_json(plan_global_batch(layout.global_batch.value_or(0), search, base.states, resolved.config,
                                                 base.engine.dp, layout.microbatches),
                               resolved.config);
        scale_curve_to_measured_step(context, inputs, base);
        if (!calibrate_compute_busy.empty()) {
            context.contention = host_contention(base, context, resolved.config);
            inputs.compute["host_contention"] = to_json(context.contention);
        }
        inputs.states = {{"convention", states_name(base.states)},
                         {"source", states ? "--states " + *states : default_states_reason(run_precision, cluster)}};
        std::optional<SearchResult> searched;
        const std::vector<PlanPrediction> layouts = predict(base, context, searched);
        return report(invocation, inputs, layouts, searched ? &*searched : nullptr, cluster);
    }

  private:
    // The cluster file, or the preset device with --gpus (default: the layout's degrees).
    ClusterSpec resolve_cluster() const {
        ClusterSpec cluster;
        if (!cluster_path.empty()) {
            cluster = read_cluster_file(cluster_path);
            if (gpus) cluster.gpus = *gpus;
        } else {
            cluster.device = device_preset(device);
            cluster.gpus = gpus.value_or(layout.tp * layout.pp * layout.cp * layout.dp.value_or(1));
            cluster.gpus_per_host = gpus_per_host;
            cluster.source = "--gpus " + std::to_string(cluster.gpus) + " --gpus-per-host " + std::to_string(gpus_per_host) +
                             " --device " + device;
        }
        if (cores_per_host) {
            cluster.cores_per_host = *cores_per_host;
            cluster.cores_source = "--cores-per-host";
        }
        return cluster;
    }

    // How compute is priced: from each layer's work on the device's GEMM curve
    // (plan/device_compute.hpp) unless one rate is given (--efficiency, --calibrate-compute); a
    // device without a curve is refused, naming the ways to give it one. --calibrate-compute with
    // --gemm-curve: the curve by shape, set to the measured run's level. A CPU calibration also
    // gives `cluster` its cores per host when they were not told.
    PlanContext resolve_compute(const ModelConfig& config, Precision run_precision, ClusterSpec& cluster) const {
        const double peak = run_precision == Precision::bf16 ? cluster.device.peak_tflops_bf16
                                                             : cluster.device.peak_tflops_fp32;
        ComputeRate rate;
        std::optional<DeviceCompute> device_compute;
        if (!efficiency && (calibrate_compute.empty() || !gemm_curve.empty()))
            device_compute = resolve_device_compute(cluster.device, run_precision == Precision::bf16, gemm_curve,
                                                    cluster_path.empty() ? "--device " + device : "--cluster " + cluster_path);
        if (calibrate_compute.empty()) {
            rate.tflops_per_gpu = peak * efficiency.value_or(0.5);
            rate.source = device_compute ? std::string(gemm_curve.empty() ? "uncalibrated: " : "") +
                                               "each layer's work on the GEMM curve of " + device_compute->gemm.source
                                         : "uncalibrated: " + cluster.device.source + " peak " + std::to_string(peak) +
                                               " TFLOP/s x --efficiency " + std::to_string(efficiency.value_or(0.5));
            rate.optimizer_source = "uncalibrated: " + cluster.device.source + " memory bandwidth";
        } else {
            rate = parbench::calibrate_compute(calibrate_compute, config);
            // A CPU's rate would plan the GPU at CPU speed (a 2-core host's oversubscription carried
            // onto H100s once planned a 4.8e9 ms step).
            if (rate.measured_on_cpu && cluster.device.preset)
                throw UsageError("--calibrate-compute " + calibrate_compute + " was measured on a CPU, but the plan is "
                                 "for " + cluster.device.name + " GPUs (" + cluster.device.source + "); give a report "
                                 "measured on that GPU, or describe the CPU host as the device in a --cluster file");
            // A CPU calibration tells how many cores its host had: the plan's hosts, unless told.
            if (cluster.cores_per_host == 0 && rate.measured_cores > 0) {
                cluster.cores_per_host = rate.measured_cores;
                cluster.cores_source = "the host of --calibrate-compute " + calibrate_compute;
            }
        }
        if (device_compute && !calibrate_compute.empty()) {
            if (!rate.run)
                throw UsageError("--calibrate-compute " + calibrate_compute + " with --gemm-curve: give a train report "
                                 "(its measured step sets the curve's level), not an ops report");
            // Its own optimizer then, at the rate the ops report measured AdamW at, or the device's
            // memory bandwidth.
            rate.includes_optimizer = false;
            if (!rate.optimizer_gbps)
                if (const auto gbps = ops_optimizer_gbps(gemm_curve)) {
                    rate.optimizer_gbps = gbps;
                    rate.optimizer_source = "--gemm-curve " + gemm_curve + ": its adamw_update bytes/s";
                }
        }
        return PlanContext{cluster, CommModel(cluster), rate, PassCosts{}, false, true, device_compute};
    }

    // The model, cluster and compute as the outputs quote them.
    PlanInputs describe_inputs(const ResolvedModel& resolved, const PlanContext& context) const {
        PlanInputs inputs;
        inputs.model = to_json(resolved.config);
        inputs.model["source"] = resolved.source;
        inputs.model["parameters"] = static_cast<double>(
            model_parameter_layout(resolved.config, resolved.config.seq_len).total_numel());
        if (resolved.config.moe) {
            const MoeParameterCount count = moe_parameter_count(resolved.config);
            inputs.model["parameters"] = static_cast<double>(count.total);
            inputs.model["active_parameters"] = static_cast<double>(count.active);
            inputs.model["routed_expert_parameters"] = static_cast<double>(count.routed_experts);
            inputs.model["moe_approximations"] =
                moe_approximations(resolved.config, layout.moe_a2a_overlap, layout.moe_a2a_overlap_1f1b);
        }
        inputs.cluster = to_json(context.cluster);
        inputs.compute = to_json(context.rate);
        if (context.device_compute) inputs.compute["device_model"] = to_json(*context.device_compute);
        // Without a measured rate the MFU is the assumed efficiency less the step's other parts:
        // an assumption, which the outputs say.
        inputs.compute["mfu_basis"] = calibrate_compute.empty() ? "assumed" : "calibrated";
        return inputs;
    }

    // --calibrate: an alpha-beta fit per collective swept, each warned about when it fits poorly.
    void add_collective_fits(PlanContext& context, PlanInputs& inputs) const {
        nlohmann::json fits = nlohmann::json::array();
        if (!calibrate.empty())
            for (const CollectiveFit& fit : fit_collective_reports(calibrate)) {
                context.comm.add_fit(fit);
                fits.push_back(to_json(fit));
                if (!fit.warning.empty()) std::cerr << ("warning: " + fit.warning + "\n") << std::flush;
            }
        inputs.comm = {{"fits", fits},
                       {"preset_links", inputs.cluster["device"]},
                       {"summary", calibrate.empty() ? "uncalibrated: the " + context.cluster.device.source + " links"
                                                     : "calibrated from " + std::to_string(fits.size()) +
                                                           " collective fits (others fall back to the preset links)"}};
    }

    // --fbw: one micro-batch's forward, backward and weight times for the schedule simulation.
    void add_pass_costs(PlanContext& context, PlanInputs& inputs) const {
        if (!pass_costs.empty()) {
            std::vector<double> costs;
            std::stringstream stream(pass_costs);
            std::string item;
            while (std::getline(stream, item, ',')) costs.push_back(parse_finite(item, "--fbw"));
            if (costs.size() != 3 || !(costs[0] > 0) || !(costs[1] > 0) || !(costs[2] >= 0) ||
                *std::max_element(costs.begin(), costs.end()) > max_pass_cost)
                throw UsageError("--fbw '" + pass_costs + "': give the F, B and W times of one micro-batch, e.g. 1,2,1 "
                                 "(F and B above 0, W 0 or more, each at most 1e9)");
            context.pass_costs = PassCosts{costs[0], costs[1], costs[2]};
            context.pass_costs_given = true;
        }
        inputs.pass_costs = {{"forward", context.pass_costs.forward}, {"backward", context.pass_costs.backward},
                             {"weight", context.pass_costs.weight},
                             {"source", context.pass_costs_given ? "--fbw" : "the schedule's balanced costs"}};
    }

    // --calibrate-compute with --gemm-curve: the curve scaled so that the measured run's step is
    // what the curve gives for it.
    void scale_curve_to_measured_step(PlanContext& context, PlanInputs& inputs, const PlanLayout& base) const {
        if (!context.device_compute || !context.rate.run) return;
        const double gbps = context.rate.optimizer_gbps.value_or(context.cluster.device.memory_bandwidth_gbps);
        context.device_compute->step_scale =
            measured_step_scale(*context.device_compute, base.engine, base.engine.attention, *context.rate.run, gbps);
        context.device_compute->step_scale_source = "--calibrate-compute " + calibrate_compute + ": its measured "
                                                    "step over the curve's compute and optimizer for the same run";
        inputs.compute["device_model"] = to_json(*context.device_compute);
    }

    // The one layout's prediction, or the search's leading --top layouts (`searched` then holds
    // the whole search).
    std::vector<PlanPrediction> predict(const PlanLayout& base, PlanContext& context,
                                        std::optional<SearchResult>& searched) const {
        if (!search) return {predict_layout(base, context)};
        SearchSpace space;
        space.base = base;
        if (microbatch_list) space.microbatch_counts = parse_int_list(*microbatch_list, "--microbatch-list");
        space.extend_microbatch_counts = !microbatch_list;
        space.allow_cross_host_tp = allow_cross_host_tp;
        space.engine_only = base.states == StateConvention::parbench;
        context.simulate_balanced = false;
        searched = search_layouts(space, context);
        // Nothing formed: the batch or the list stopped it, not memory (issue 36).
        const std::string unformed = unformed_reason(*searched, space, context.cluster.gpus, layout.global_batch.has_value());
        if (!unformed.empty()) throw UsageError(unformed);
        std::vector<PlanPrediction> layouts;
        for (std::size_t i = 0; i < searched->ranked.size() && static_cast<int>(i) < top; ++i)
            layouts.push_back(searched->ranked[i]);
        return layouts;
    }

    // Console (or Markdown) and --json; the exit status says whether anything fits.
    int report(const Invocation& invocation, const PlanInputs& inputs, const std::vector<PlanPrediction>& layouts,
               const SearchResult* search_result, const ClusterSpec& cluster) const {
        if (markdown)
            print_plan_markdown(std::cout, layouts, search_result, calibrate_compute.empty());
        else
            print_plan_console(std::cout, inputs, layouts, search_result);
        if (!json_path.empty())
            write_json_atomically(json_path, plan_document(inputs, layouts, search_result, invocation.arguments));
        const bool in_memory = search ? !search_result->ranked.empty() : layouts.front().fits;
        if (!in_memory) {
            std::cerr << (std::string("plan: ") + (search ? "no layout fits" : "the layout does not fit") + " in " +
                          cluster.device.name + "'s memory (exit status " + std::to_string(does_not_fit_exit_code) +
                          "); shard with --zero, --tp or --pp, recompute, or use more GPUs\n")
                      << std::flush;
            return does_not_fit_exit_code;
        }
        return 0;
    }

    // Every number flag, in its range (core/checked.hpp), before anything is computed from it.
    void check_flag_ranges() const {
        if (gpus) check_int(*gpus, "--gpus", 1, cluster_limits::max_gpus);
        check_int(gpus_per_host, "--gpus-per-host", 1, cluster_limits::max_gpus_per_host);
        if (cores_per_host)
            check_int(*cores_per_host, "--cores-per-host", 1, cluster_limits::max_cores_per_host,
                      "the CPU cores a host's ranks share");
        // The layout's before anything (the GPUs' default) is formed from them.
        check_layout_flag_ranges(layout);
        check_int(top, "--top", 1, max_top);
        if (model.layers) check_int(*model.layers, "--layers", 1, model_limits::max_layers);
        if (model.hidden) check_int(*model.hidden, "--hidden", 1, model_limits::max_hidden);
        if (model.heads) check_int(*model.heads, "--heads", 1, model_limits::max_hidden);
        if (model.seq) check_int(*model.seq, "--seq", 1, model_limits::max_seq_len);
        if (model.vocab) check_int(*model.vocab, "--vocab", 1, model_limits::max_vocab);
    }

    // What --search chooses itself: given, these flags would be dropped.
    void check_search_flags() const {
        if (!search) return;
        if (!layout.stage_layers.empty())
            throw UsageError("--stage-layers with --search: the search cuts balanced stages; drop one of them");
        if (layout.cp > 1)
            throw UsageError("--cp with --search: the search does not range over cp; give the layout, or drop --cp");
        if (no_reshard || hybrid_shard)
            throw UsageError(std::string(no_reshard ? "--no-reshard" : "--hybrid-shard") +
                             " with --search: the search tries both for ZeRO-3 layouts; drop it");
    }

    // ZeRO-3 as FSDP runs it (frameworks' conventions only): without resharding after forward, or
    // sharded inside a host and replicated across hosts.
    void resolve_fsdp(PlanLayout& p, const ClusterSpec& cluster) const {
        if (!no_reshard && !hybrid_shard) return;
        const Layout& l = p.engine;
        const std::string flag = no_reshard ? "--no-reshard" : "--hybrid-shard";
        if (l.zero != 3 || p.states == StateConvention::parbench)
            throw UsageError(flag + " models ZeRO-3 as FSDP runs it; add --zero 3 and --states zero|megatron, or drop it");
        p.reshard_after_forward = !no_reshard;
        if (!hybrid_shard) return;
        p.shard_group = std::max(1, cluster.gpus_per_host / (l.tp * l.cp));
        if (p.shard_group < 2)
            throw UsageError("--hybrid-shard shards over a host's dp ranks, but --tp " + std::to_string(l.tp) +
                             " fills the host; lower --tp or drop --hybrid-shard");
        if (l.dp <= p.shard_group || l.dp % p.shard_group != 0)
            throw UsageError("--hybrid-shard shards over the " + std::to_string(p.shard_group) +
                             " dp ranks of a host and replicates across hosts; --dp " + std::to_string(l.dp) +
                             " must be a larger multiple of it, or drop --hybrid-shard");
    }

    // A mixture-of-experts model (plan/moe_plan.hpp): the frameworks' conventions count it on its
    // dense skeleton and add the MoE layers; parbench's engine formulas (theory/memory.hpp,
    // rank_traffic.hpp) count the MoE layers as train builds them, so they take the model itself.
    // The layout's own MoE rules are resolve_layout's; these are plan's.
    void resolve_experts(PlanLayout& p, const ModelConfig& config) const {
        if (!config.moe && moe_imbalance) throw UsageError(dense_model_moe_flag_refusal("--moe-imbalance", config));
        if (!config.moe && !config.mla) return;
        const bool engine = p.states == StateConvention::parbench;
        if (config.kind == ModelKind::gpt && !engine)
            throw UsageError("--model " + config.name + ": a GPT mixture of experts is planned with --states parbench "
                             "only (the frameworks' MoE conventions count a Llama skeleton: SwiGLU MLPs, no biases); "
                             "add --states parbench");
        if (no_reshard || hybrid_shard)
            throw UsageError(std::string(no_reshard ? "--no-reshard" : "--hybrid-shard") + " is not modelled for the "
                             "experts of an MoE model; drop it");
        p.experts.model = config;
        p.experts.imbalance = moe_imbalance.value_or(1.0);
        if (!engine) p.engine.model = dense_skeleton(config);
        if (!config.moe) return;
        if (search) {
            if (layout.ep) throw UsageError("--ep with --search: the search ranges over ep (divisors of the experts and dp); drop --ep");
            if (layout.moe_a2a_overlap_1f1b)
                throw UsageError("--moe-a2a-overlap-1f1b with --search: the search tries it on every MoE 1F1B layout "
                                 "that takes it, beside the blocking one; drop it");
            return;
        }
        if (p.engine.tp > 1 && !p.engine.sp && !engine)
            throw UsageError("--tp " + std::to_string(p.engine.tp) + " without --sp: Megatron-core runs MoE layers under "
                             "tensor parallelism only with sequence parallelism (each tp rank dispatches its shard of "
                             "the tokens); add --sp");
    }

    // The slowdown of a CPU host's ranks computing at once (plan/host_contention.hpp): the busy
    // runs' level over the alone run's, each set on the same GEMM curve.
    HostContention host_contention(const PlanLayout& base, const PlanContext& context, const ModelConfig& config) const {
        const ComputeRate& rate = context.rate;
        if (!context.device_compute || !context.rate.run)
            throw UsageError("--calibrate-compute-busy: give --calibrate-compute (the same one-rank run alone) and "
                             "--gemm-curve, whose curve both levels are set on");
        if (!is_cpu_host(context.cluster))
            throw UsageError("--calibrate-compute-busy: the plan is for " + context.cluster.device.name + ", not a "
                             "CPU host; give a --cluster file of the host (its cores_per_host) the runs measured");
        const BusyCompute busy = calibrate_busy_compute(calibrate_compute_busy, config, rate);
        const double gbps = rate.optimizer_gbps.value_or(context.cluster.device.memory_bandwidth_gbps);
        HostContention contention;
        contention.busy_ranks = busy.ranks;
        const double busy_scale =
            measured_step_scale(*context.device_compute, base.engine, base.engine.attention, busy.run, gbps);
        contention.factor = busy_slowdown(busy_scale, context.device_compute->step_scale);
        contention.source = busy.source + ", over --calibrate-compute " + calibrate_compute + "'s step alone";
        if (busy_scale < context.device_compute->step_scale)
            contention.source += " (measured " + std::to_string(busy_scale / context.device_compute->step_scale) +
                                 ", faster than alone: the runs' noise, taken as no slowdown)";
        return contention;
    }

    // The byte convention when --states is not given: the frameworks' mixed precision (Megatron's
    // 18 B/param) for a bf16 job, parbench's own fp32 trainer for an fp32 one or on a CPU host (a
    // cluster whose cores are known), which is what parbench's own runs are.
    static bool plans_parbench_runs(Precision run_precision, const ClusterSpec& cluster) {
        return run_precision == Precision::fp32 || cluster.cores_per_host > 0;
    }
    StateConvention default_states(Precision run_precision, const ClusterSpec& cluster) const {
        return plans_parbench_runs(run_precision, cluster) ? StateConvention::parbench : StateConvention::megatron;
    }
    static std::string default_states_reason(Precision run_precision, const ClusterSpec& cluster) {
        if (!plans_parbench_runs(run_precision, cluster))
            return "default for a bf16 job: the frameworks' mixed precision (Megatron-LM's bf16 parameters, fp32 "
                   "gradients and Adam state); --states parbench plans parbench's own fp32 trainer, --states zero "
                   "ZeRO's fp16 convention";
        return std::string("default for ") +
               (run_precision == Precision::fp32 ? "an fp32 job" : "a CPU host (cores per host known)") +
               ": parbench's own trainer, every buffer it allocates; --states megatron|zero for a framework's job";
    }

    // Where the layout is planned, and what the flags not given mean there.
    LayoutTarget layout_target(const ModelConfig& config, StateConvention states_used, Precision run_precision,
                               const ClusterSpec& cluster) const {
        const std::vector<std::string> presets = device_preset_names();
        // A GPU: a preset, or a --cluster file's device that computes on a GPU preset's curve.
        const bool gpu = std::find(presets.begin(), presets.end(), cluster.device.name) != presets.end() ||
                         !cluster.device.gemm_preset.empty();
        LayoutTarget target;
        target.engine = states_used == StateConvention::parbench;
        target.world = WorldSize{cluster.gpus, "GPUs", "--gpus"};
        target.degrees_searched = search;
        // parbench's own engine attends as train chooses (theory/engine_attention.hpp): its block
        // kernels tile on a CPU host (a device that is no GPU preset, or --cores-per-host) only.
        target.block_attention_tiles = !gpu || cluster.cores_per_host > 0;
        // Flash attention is how bf16 jobs on GPUs run; fp32 plans keep the scores (naive).
        target.auto_attention = run_precision == Precision::bf16 && gpu ? AttentionKind::flash : AttentionKind::naive;
        target.default_precision = run_precision;
        // Not given: the default and its reason (plan/global_batch.hpp): train's under --states
        // parbench, so the same flags count the same bytes; a search's a batch someone trains
        // with; one layout's one sequence per micro-batch per data-parallel rank.
        if (target.engine) {
            target.default_global_batch = engine_default_global_batch;
            target.default_global_batch_note = " (train's default, which --states parbench plans)";
        } else if (search) {
            target.default_global_batch =
                plan_global_batch(0, true, states_used, config, 1, layout.microbatches).sequences;
        } else {
            target.default_global_batch.reset();
        }
        return target;
    }

    // The one layout the flags give (resolved and checked as train resolves them,
    // theory/layout.hpp), or the search's base.
    PlanLayout base_layout(const ModelConfig& config, Precision run_precision, const ClusterSpec& cluster) const {
        PlanLayout p;
        p.states = states ? parse_states(*states) : default_states(run_precision, cluster);
        check_search_flags();
        if (!search && layout.tp > cluster.gpus_per_host && !allow_cross_host_tp)
            throw UsageError("--tp " + std::to_string(layout.tp) + " is above --gpus-per-host " +
                             std::to_string(cluster.gpus_per_host) +
                             ": tensor parallelism across hosts is slow; lower --tp or add --allow-cross-host-tp");
        p.engine = resolve_layout(layout, config, config.seq_len, layout_target(config, p.states, run_precision, cluster));
        // Plan's pricing of the frameworks' overlap and FP8 needs each GEMM's time on the device.
        const bool one_rate = efficiency || !calibrate_compute.empty();
        if (p.engine.tp_comm_overlap && one_rate)
            throw UsageError("--tp-comm-overlap pairs each collective with its GEMM's time on the device's curve; "
                             "drop --efficiency and --calibrate-compute, which give one rate instead");
        if (fp8) {
            if (p.states == StateConvention::parbench || run_precision != Precision::bf16)
                throw UsageError("--fp8 prices a framework's FP8 linear layers in a bf16 job; parbench's train runs "
                                 "none: plan with --states megatron|zero and --precision bf16, or drop it");
            if (cluster.device.peak_tflops_fp8 <= 0)
                throw UsageError("--fp8: " + cluster.device.name + " has no FP8 peak (A100 has no FP8 tensor cores; a "
                                 "--cluster file gives \"peak_tflops_fp8\"); drop --fp8");
            if (one_rate)
                throw UsageError("--fp8 prices the linear layers' GEMMs on the device's FP8 curve; drop --efficiency "
                                 "and --calibrate-compute, which give one rate instead");
            // Priced in 16 bits only: what the policy keeps and recomputes around Float8's casts and
            // their amax reductions (its _save_list keeps abs and max) is not modelled.
            if (p.engine.recompute == Recompute::selective_op)
                throw UsageError("--recompute selective-op with --fp8: the policy is priced for bf16 linear layers "
                                 "only, not around Float8's casts; use --recompute selective or full");
            p.fp8 = true;
        }
        if (tp_comm_shared_sms) {
            if (!p.engine.tp_comm_overlap)
                throw UsageError("--tp-comm-shared-sms says how --tp-comm-overlap's GEMMs share the SMs; add "
                                 "--tp-comm-overlap (with --sp) or drop it");
            p.tp_comm_sm_margin = false;
        }
        if (eager) {
            if (p.states == StateConvention::parbench)
                throw UsageError("--eager prices a framework's eager PyTorch element-wise ops; parbench's train runs its "
                                 "own kernels: plan with --states megatron|zero, or drop it");
            if (config.kind != ModelKind::llama || config.moe)
                throw UsageError("--eager prices torchtitan's dense Llama code op by op; model " + config.name +
                                 " is not a dense Llama model: drop --eager");
            if (one_rate)
                throw UsageError("--eager prices the element-wise ops at the device's memory bandwidth; drop "
                                 "--efficiency and --calibrate-compute, which give one rate instead");
            p.eager_elementwise = true;
        }
        resolve_fsdp(p, cluster);
        resolve_experts(p, config);
        return p;
    }
};

}  // namespace

std::unique_ptr<Command> add_plan_command(CLI::App& app) {
    auto command = std::make_unique<PlanCommand>();
    PlanCommand& c = *command;
    CLI::App* sub = app.add_subcommand("plan", "Predict memory, traffic, bubble and step time of a layout (no MPI)");
    add_model_flags(*sub, c.model.model, c.model.seq);
    sub->add_option("--params", c.model.params, "Parameter count (7.5B, 350M) for a GPT shape");
    sub->add_option("--layers", c.model.layers, "Transformer layers");
    sub->add_option("--hidden", c.model.hidden, "Hidden size");
    sub->add_option("--heads", c.model.heads, "Attention heads (default hidden/128)");
    sub->add_option("--vocab", c.model.vocab, "Vocabulary (default 51200)");
    sub->add_option("--gpus", c.gpus, "GPUs in all (default dp x tp x pp x cp)");
    sub->add_option("--gpus-per-host", c.gpus_per_host, "GPUs per host")->capture_default_str();
    sub->add_option("--device", c.device, "Device preset: A100, H100, H200, B200")->capture_default_str();
    sub->add_option("--cluster", c.cluster_path, "Cluster description JSON (device, gpus, gpus_per_host)");
    sub->add_option("--cores-per-host", c.cores_per_host,
                    "CPU cores a host's ranks share (more ranks than cores: each computes at cores/ranks)");
    sub->add_flag("--allow-cross-host-tp", c.allow_cross_host_tp, "Let tp exceed --gpus-per-host");
    add_layout_flags(*sub, c.layout);
    sub->add_option("--states", c.states,
                    "Byte convention: zero, megatron, parbench (default: megatron for a bf16 job, parbench for an fp32 "
                    "one or a CPU host with known cores)");
    sub->add_flag("--no-reshard", c.no_reshard,
                  "ZeRO-3 as FSDP without resharding after forward (one gather per layer, parameters kept)");
    sub->add_flag("--hybrid-shard", c.hybrid_shard,
                  "ZeRO-3 as FSDP's hybrid sharding: shard inside a host, replicate across hosts");
    sub->add_flag("--fp8", c.fp8,
                  "FP8 linear layers (Transformer Engine, torchtitan Float8): their GEMMs at the device's FP8 peak and "
                  "measured FP8 efficiency, activations cast before each; attention and the rest in bf16");
    sub->add_flag("--tp-comm-shared-sms", c.tp_comm_shared_sms,
                  "--tp-comm-overlap as Transformer Engine before 2.0 ran it by default: each GEMM on every SM beside "
                  "the communication kernels (no SM margin), the hidden time slowing the compute beside it");
    sub->add_flag("--eager", c.eager,
                  "A dense Llama job's RMSNorms, RoPE and SwiGLU as eager PyTorch runs torchtitan's code, one kernel per "
                  "op with fp32 upcasts (torchtitan without torch.compile); default: one fused kernel each");
    sub->add_option("--fbw", c.pass_costs, "F,B,W times of one micro-batch for the schedule simulation");
    sub->add_option("--efficiency", c.efficiency,
                    "One fraction of peak for all compute (default: each GEMM's shape on the device's curve, "
                    "element-wise work at HBM bandwidth)");
    sub->add_option("--gemm-curve", c.gemm_curve, "parbench-ops report whose matmul entries fit the GEMM curve");
    sub->add_option("--calibrate", c.calibrate, "Collective reports (size sweeps) to fit alpha/beta from");
    sub->add_option("--calibrate-compute", c.calibrate_compute, "parbench-ops or train report for the compute rate");
    sub->add_option("--calibrate-compute-busy", c.calibrate_compute_busy,
                    "train reports of the --calibrate-compute run repeated at once, one per core of the CPU host: "
                    "the compute level with every core busy");
    sub->add_option("--moe-imbalance", c.moe_imbalance,
                    "MoE: max/mean tokens per ep rank, what `parbench alltoallv --skew` reports (default 1, balanced)");
    sub->add_flag("--search", c.search, "Rank every layout that divides the GPUs and the model (and ep for MoE)");
    sub->add_option("--top", c.top, "Layouts to show with --search")->capture_default_str();
    sub->add_option("--microbatch-list", c.microbatch_list,
                    "Micro-batch counts --search tries (default 1,2,4,...,512 and the counts that cut each dp rank's "
                    "batch into micro-batches of 1, 2, 4 and 8)");
    sub->add_option("--json", c.json_path, "Write the parbench.plan/v1 document here");
    sub->add_flag("--markdown", c.markdown, "Print a Markdown table");
    return command;
}

}  // namespace parbench

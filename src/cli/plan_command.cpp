// `parbench plan`: memory, traffic, bubble and step time of a model and layout on a cluster,
// from formulas and parbench's own measurements (no MPI; src/plan/). One layout from train's
// layout flags, or --search over every layout that divides the GPUs and the model.
#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/command.hpp"
#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "plan/layout_search.hpp"
#include "plan/moe_plan.hpp"
#include "plan/plan_output.hpp"
#include "theory/engine_attention.hpp"
#include "theory/engine_defaults.hpp"
#include "theory/expert_parallel.hpp"
#include "theory/layout_check.hpp"
#include "theory/moe_a2a_overlap_1f1b.hpp"
#include "theory/model_shape.hpp"
#include "theory/moe_work.hpp"
#include "theory/pipeline/partition.hpp"
#include "train/model.hpp"

namespace parbench {
namespace {

// The ranges of plan's own flags (the model's sizes are model_limits', the cluster's
// cluster_limits'): beyond any job run, and small enough that every product plan forms is exact
// and every table it builds (a schedule of pp x microbatches x virtual stages) is bounded.
constexpr int max_microbatches = 1 << 16;
constexpr std::int64_t max_schedule_slots = std::int64_t{1} << 20;
constexpr std::int64_t max_global_batch = std::int64_t{1} << 30;
constexpr int max_top = 10000;
constexpr double max_bucket_mib = 1 << 20;
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
            if (used != item.size() || value < 1 || value > max_microbatches) throw std::invalid_argument(item);
            values.push_back(value);
        } catch (const std::exception&) {
            throw UsageError(flag + " '" + text + "': give integers from 1 to " + std::to_string(max_microbatches) +
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
    std::optional<int> dp;
    int tp = 1, pp = 1, zero = 0, microbatches = 1, virtual_stages = 1, global_batch = 0, cp = 1;
    std::optional<std::string> cp_style, cp_balance;
    bool sp = false, overlap = false, prefetch = false, no_reshard = false, hybrid_shard = false;
    std::optional<std::string> precision;  // default: default_precision(states)
    std::string schedule = "1f1b", recompute = "none", p2p = "nonblocking";
    std::optional<std::string> states;  // default: default_states()
    std::optional<double> bucket_mb;
    std::string pass_costs;
    std::optional<double> efficiency;
    std::vector<int> stage_layers;
    std::optional<std::string> attention;
    std::string gemm_curve;
    std::vector<std::string> calibrate;
    std::string calibrate_compute;
    std::optional<int> ep;                 // MoE models only (plan/moe_plan.hpp)
    std::optional<int> etp;                // the experts' tensor parallelism: 1 or tp (unset: the convention's)
    std::optional<double> moe_imbalance;
    bool moe_a2a_overlap = false;
    bool moe_a2a_overlap_1f1b = false;
    bool search = false;
    int top = 10;
    std::string microbatch_list = "1,2,4,8,16,32,64,128,256,512";
    std::string json_path;
    bool markdown = false;

    void validate() const override {
        check_flag_ranges();
        if (efficiency && !(*efficiency > 0.0 && *efficiency <= 1.0)) throw UsageError("--efficiency must be in (0, 1]");
        if (attention) parse_attention(*attention);
        if (!gemm_curve.empty() && (efficiency || !calibrate_compute.empty()))
            throw UsageError("--gemm-curve models compute from each GEMM's shape; drop --efficiency and "
                             "--calibrate-compute, which give one rate instead");
        if (!json_path.empty()) check_writable(json_path, "--json");
        if (ep) check_int(*ep, "--ep", 1, cluster_limits::max_gpus);
        if (etp) check_int(*etp, "--etp", 1, cluster_limits::max_gpus);
        if (moe_imbalance && !(*moe_imbalance >= 1.0 && *moe_imbalance <= max_moe_imbalance))
            throw UsageError("--moe-imbalance " + std::to_string(*moe_imbalance) + ": give the max / mean tokens an "
                             "expert-parallel rank receives, 1 (balanced) or more, as `parbench alltoallv --skew` reports it");
    }

    bool needs_mpi() const override { return false; }

    int run(Invocation& invocation) override {
        const ResolvedModel resolved = resolve_plan_model(model);
        ClusterSpec cluster;
        if (!cluster_path.empty()) {
            cluster = read_cluster_file(cluster_path);
            if (gpus) cluster.gpus = *gpus;
        } else {
            cluster.device = device_preset(device);
            cluster.gpus = gpus.value_or(tp * pp * cp * dp.value_or(1));
            cluster.gpus_per_host = gpus_per_host;
            cluster.source = "--gpus " + std::to_string(cluster.gpus) + " --gpus-per-host " + std::to_string(gpus_per_host) +
                             " --device " + device;
        }
        if (cores_per_host) {
            cluster.cores_per_host = *cores_per_host;
            cluster.cores_source = "--cores-per-host";
        }
        const Precision run_precision = parse_precision(precision.value_or(default_precision(states)));
        const double peak = run_precision == Precision::bf16 ? cluster.device.peak_tflops_bf16
                                                             : cluster.device.peak_tflops_fp32;
        ComputeRate rate;
        // Compute from each layer's work on the device's GEMM curve (plan/device_compute.hpp)
        // unless one rate is given (--efficiency, --calibrate-compute) or the device has no curve.
        std::optional<DeviceCompute> device_compute;
        if (!efficiency && calibrate_compute.empty()) {
            device_compute = device_compute_preset(cluster.device, run_precision == Precision::bf16);
            if (!gemm_curve.empty()) {
                if (!device_compute)
                    throw UsageError("--gemm-curve: device '" + cluster.device.name +
                                     "' has no memory-bandwidth preset; use --device A100|H100|H200|B200");
                device_compute->gemm = fit_gemm_curve(gemm_curve, device_compute->peak_tflops);
            }
        }
        if (calibrate_compute.empty()) {
            rate.tflops_per_gpu = peak * efficiency.value_or(0.5);
            rate.source = device_compute ? std::string(gemm_curve.empty() ? "uncalibrated: " : "") +
                                               "each layer's work on the GEMM curve of " + device_compute->gemm.source
                                         : "uncalibrated: " + cluster.device.source + " peak " + std::to_string(peak) +
                                               " TFLOP/s x --efficiency " + std::to_string(efficiency.value_or(0.5));
            rate.optimizer_source = "uncalibrated: " + cluster.device.source + " memory bandwidth";
        } else {
            rate = parbench::calibrate_compute(calibrate_compute, resolved.config);
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
        PlanContext context{cluster, CommModel(cluster), rate, PassCosts{}, false, true, device_compute};
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
                moe_approximations(resolved.config, moe_a2a_overlap, moe_a2a_overlap_1f1b);
        }
        inputs.cluster = to_json(cluster);
        inputs.compute = to_json(context.rate);
        if (device_compute) inputs.compute["device_model"] = to_json(*device_compute);
        // Without a measured rate the MFU is the assumed efficiency less the step's other parts:
        // an assumption, which the outputs say.
        inputs.compute["mfu_basis"] = calibrate_compute.empty() ? "assumed" : "calibrated";
        nlohmann::json fits = nlohmann::json::array();
        if (!calibrate.empty())
            for (const CollectiveFit& fit : fit_collective_reports(calibrate)) {
                context.comm.add_fit(fit);
                fits.push_back(to_json(fit));
                if (!fit.warning.empty()) std::cerr << ("warning: " + fit.warning + "\n") << std::flush;
            }
        inputs.comm = {{"fits", fits},
                       {"preset_links", inputs.cluster["device"]},
                       {"summary", calibrate.empty() ? "uncalibrated: the " + cluster.device.source + " links"
                                                     : "calibrated from " + std::to_string(fits.size()) +
                                                           " collective fits (others fall back to the preset links)"}};
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

        PlanLayout base = base_layout(resolved.config, run_precision, cluster);
        inputs.states = {{"convention", states_name(base.states)},
                         {"source", states ? "--states " + *states : default_states_reason(run_precision, cluster)}};
        std::vector<PlanPrediction> layouts;
        std::optional<SearchResult> searched;
        if (search) {
            SearchSpace space;
            space.base = base;
            space.microbatch_counts = parse_int_list(microbatch_list, "--microbatch-list");
            space.allow_cross_host_tp = allow_cross_host_tp;
            space.engine_only = base.states == StateConvention::parbench;
            context.simulate_balanced = false;
            searched = search_layouts(space, context);
            for (std::size_t i = 0; i < searched->ranked.size() && static_cast<int>(i) < top; ++i)
                layouts.push_back(searched->ranked[i]);
        } else {
            layouts.push_back(predict_layout(base, context));
        }
        const SearchResult* search_result = searched ? &*searched : nullptr;
        if (markdown)
            print_plan_markdown(std::cout, layouts, search_result, calibrate_compute.empty());
        else
            print_plan_console(std::cout, inputs, layouts, search_result);
        if (!json_path.empty())
            write_json_atomically(json_path, plan_document(inputs, layouts, search_result, invocation.arguments));
        const bool in_memory = search ? !searched->ranked.empty() : layouts.front().fits;
        if (!in_memory) {
            std::cerr << (std::string("plan: ") + (search ? "no layout fits" : "the layout does not fit") + " in " +
                          cluster.device.name + "'s memory (exit status " + std::to_string(does_not_fit_exit_code) +
                          "); shard with --zero, --tp or --pp, recompute, or use more GPUs\n")
                      << std::flush;
            return does_not_fit_exit_code;
        }
        return 0;
    }

  private:
    // Every number flag, in its range (core/checked.hpp), before anything is computed from it.
    void check_flag_ranges() const {
        if (gpus) check_int(*gpus, "--gpus", 1, cluster_limits::max_gpus);
        check_int(gpus_per_host, "--gpus-per-host", 1, cluster_limits::max_gpus_per_host);
        if (cores_per_host)
            check_int(*cores_per_host, "--cores-per-host", 1, cluster_limits::max_cores_per_host,
                      "the CPU cores a host's ranks share");
        if (dp) check_int(*dp, "--dp", 1, cluster_limits::max_gpus);
        for (const auto& [value, flag] : {std::pair{tp, "--tp"}, std::pair{pp, "--pp"}, std::pair{cp, "--cp"}})
            check_int(value, flag, 1, cluster_limits::max_gpus);
        check_product({static_cast<std::uint64_t>(dp.value_or(1)), static_cast<std::uint64_t>(tp),
                       static_cast<std::uint64_t>(pp), static_cast<std::uint64_t>(cp)},
                      dp ? "--dp x --tp x --pp x --cp" : "--tp x --pp x --cp", cluster_limits::max_gpus,
                      "that many GPUs is beyond what plan models");
        check_int(zero, "--zero", 0, 3);
        check_int(microbatches, "--microbatches", 1, max_microbatches);
        check_int(virtual_stages, "--virtual-stages", 1, model_limits::max_layers);
        check_product({static_cast<std::uint64_t>(pp), static_cast<std::uint64_t>(microbatches),
                       static_cast<std::uint64_t>(virtual_stages)},
                      "--pp x --microbatches x --virtual-stages", max_schedule_slots,
                      "plan simulates schedules of up to that many slots; lower one of them");
        if (global_batch != 0) check_int(global_batch, "--global-batch", 1, max_global_batch);
        if (bucket_mb) check_number(*bucket_mb, "--bucket-mb", 0, max_bucket_mib, true);
        check_int(top, "--top", 1, max_top);
        if (model.layers) check_int(*model.layers, "--layers", 1, model_limits::max_layers);
        if (model.hidden) check_int(*model.hidden, "--hidden", 1, model_limits::max_hidden);
        if (model.heads) check_int(*model.heads, "--heads", 1, model_limits::max_hidden);
        if (model.seq) check_int(*model.seq, "--seq", 1, model_limits::max_seq_len);
        if (model.vocab) check_int(*model.vocab, "--vocab", 1, model_limits::max_vocab);
    }

    // "a x b x c" within `limit`, naming the flags (a product of flags that is too large).
    static void check_product(std::initializer_list<std::uint64_t> factors, const std::string& what, std::int64_t limit,
                              const std::string& hint) {
        checked_product(factors, what, static_cast<std::uint64_t>(limit), hint);
    }

    // Context parallelism as train takes it: the same flags, one check (theory/layout_check.hpp).
    void resolve_context(PlanLayout& p, const ModelConfig& config) const {
        EngineLayout& l = p.engine;
        const ContextChoice choice = check_context_parallel(config, config.seq_len, ContextRequest{cp, cp_style, cp_balance});
        if (cp == 1) return;
        if (search) throw UsageError("--cp with --search: the search does not range over cp; give the layout, or drop --cp");
        l.cp = cp;
        l.cp_style = choice.style;
        l.cp_balance = choice.balance;
    }

    // train's pipeline check of the layout the flags gave (its engine fields, filled from them
    // above), with --stage-layers.
    PipelineRequest pipeline_request(const PlanLayout& p) const {
        const EngineLayout& l = p.engine;
        PipelineRequest request;
        request.pp = l.pp;
        request.schedule = l.schedule;
        request.p2p = l.p2p;
        request.virtual_stages = l.virtual_stages;
        request.stage_layers = stage_layers;
        request.microbatches = l.microbatches;
        request.zero = l.zero;
        request.overlap = l.overlap;
        request.prefetch = l.prefetch;
        request.sp = l.sp;
        request.recompute = l.recompute;
        request.engine = p.states == StateConvention::parbench;
        return request;
    }

    // --states parbench plans parbench's own train, which runs an MoE model only where its engine
    // does (train/train_options.cpp check_moe): the same layouts refused, naming the flag.
    void check_engine_moe_layout(const ModelConfig& config) const {
        const std::string fix = "; or plan a framework's job with --states megatron|zero";
        if (config.mla)
            throw UsageError("--states parbench with --model " + config.name + ": multi-head latent attention (\"mla\") "
                             "is counted by the frameworks' conventions only; train does not run it" + fix);
    }

    // --ep and --moe-imbalance for a mixture-of-experts model (plan/moe_plan.hpp); refused for a
    // dense one and where plan does not model MoE.
    void resolve_experts(PlanLayout& p, const ModelConfig& config) const {
        if (!config.moe) {
            if (ep || etp || moe_imbalance || moe_a2a_overlap || moe_a2a_overlap_1f1b)
                throw UsageError(std::string(ep                ? "--ep"
                                             : etp             ? "--etp"
                                             : moe_imbalance   ? "--moe-imbalance"
                                             : moe_a2a_overlap ? "--moe-a2a-overlap"
                                                               : "--moe-a2a-overlap-1f1b") +
                                 ": --model has no experts (no \"moe\" "
                                 "in its config); expert parallelism needs a mixture-of-experts model, e.g. --model "
                                 "mixtral-8x7b, or drop the flag");
            if (!config.mla) return;
        }
        if (p.states == StateConvention::parbench) check_engine_moe_layout(config);
        if (config.kind == ModelKind::gpt && p.states != StateConvention::parbench)
            throw UsageError("--model " + config.name + ": a GPT mixture of experts is planned with --states parbench "
                             "only (the frameworks' MoE conventions count a Llama skeleton: SwiGLU MLPs, no biases); "
                             "add --states parbench");
        if (no_reshard || hybrid_shard)
            throw UsageError(std::string(no_reshard ? "--no-reshard" : "--hybrid-shard") + " is not modelled for the "
                             "experts of an MoE model; drop it");
        p.experts.model = config;
        p.experts.imbalance = moe_imbalance.value_or(1.0);
        p.experts.a2a_overlap = moe_a2a_overlap;
        p.engine.moe_a2a_overlap = moe_a2a_overlap;  // train's call counts: two halves per alltoallv
        if (!config.moe) return;
        if (search) {
            if (ep) throw UsageError("--ep with --search: the search ranges over ep (divisors of the experts and dp); drop --ep");
            if (moe_a2a_overlap_1f1b)
                throw UsageError("--moe-a2a-overlap-1f1b with --search: the search tries it on every MoE 1F1B layout "
                                 "that takes it, beside the blocking one; drop it");
            return;
        }
        p.experts.ep = ep.value_or(1);
        if (moe_a2a_overlap && p.experts.ep == 1)  // train's message (train_options.cpp check_moe)
            throw UsageError("--moe-a2a-overlap needs --ep 2 or more: without expert parallelism there is no "
                             "all-to-all to overlap; add --ep N or drop the flag");
        const bool engine = p.states == StateConvention::parbench;
        if (moe_a2a_overlap_1f1b) {
            // train's rule, one copy (theory/moe_a2a_overlap_1f1b.hpp), in train's order (before the
            // expert-parallel checks), on the experts' tensor parallelism as planned (the
            // convention's default when --etp is not given).
            check_moe_a2a_overlap_1f1b({p.experts.ep, moe_a2a_overlap, p.engine.pp, schedule, p.engine.virtual_stages,
                                        p.engine.microbatches, etp.value_or(engine ? 1 : p.engine.tp), recompute, cp});
            check_moe_a2a_overlap_1f1b_stages(config, p.engine.stage_ranges);
            p.experts.a2a_overlap_1f1b = true;
        }
        // parbench's engine formulas size the MoE layers' receive buffers and exchanges by ep.
        if (p.states == StateConvention::parbench) p.engine.ep = p.experts.ep;
        check_expert_parallel(config, p.experts.ep, p.engine.dp, p.engine.cp);  // train's check
        // The experts' tensor parallelism: parbench's engine splits them only when asked (and not
        // yet under --sp), Megatron-core by default over the tp degree.
        p.experts.etp = etp.value_or(engine ? 1 : p.engine.tp);
        check_expert_tensor_parallel(config, p.experts.etp, p.engine.tp, engine && p.engine.sp);
        if (engine) p.engine.etp = p.experts.etp;
        if (p.engine.tp > 1 && !p.engine.sp && p.states != StateConvention::parbench)
            throw UsageError("--tp " + std::to_string(p.engine.tp) + " without --sp: Megatron-core runs MoE layers under "
                             "tensor parallelism only with sequence parallelism (each tp rank dispatches its shard of "
                             "the tokens); add --sp");
    }

    // The one layout the flags give (checked as train checks them), or the search's base.
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

    PlanLayout base_layout(const ModelConfig& config, Precision run_precision, const ClusterSpec& cluster) const {
        PlanLayout p;
        p.states = states ? parse_states(*states) : default_states(run_precision, cluster);
        const std::vector<std::string> gpus = device_preset_names();
        const bool gpu = std::find(gpus.begin(), gpus.end(), cluster.device.name) != gpus.end();
        const bool requested = attention && *attention != "auto";
        if (p.states == StateConvention::parbench) {
            // parbench's own engine attends as train chooses (theory/engine_attention.hpp): its block
            // kernels tile on a CPU host (a device that is no GPU preset, or --cores-per-host) only.
            const bool cpu_host = !gpu || cluster.cores_per_host > 0;
            p.engine.attention = engine_attention(attention.value_or("auto"), cpu_host, config.seq_len, cp);
            p.attention = p.engine.attention;
        } else {
            // Flash attention is how bf16 jobs on GPUs run; fp32 plans keep the scores (naive).
            p.attention = requested ? parse_attention(*attention)
                          : run_precision == Precision::bf16 && gpu ? AttentionKind::flash
                                                                    : AttentionKind::naive;
        }
        EngineLayout& l = p.engine;
        // The frameworks' conventions count an MoE model on its dense skeleton and add the MoE
        // layers (plan/moe_plan.hpp); parbench's engine formulas (theory/memory.hpp,
        // rank_traffic.hpp) count the MoE layers as train builds them, so they take the model itself.
        l.model = (config.moe || config.mla) && p.states != StateConvention::parbench ? dense_skeleton(config) : config;
        l.seq_len = config.seq_len;
        l.precision = run_precision;
        l.recompute = parse_recompute(recompute);
        l.tp = tp;
        l.pp = pp;
        l.sp = sp;
        l.zero = zero;
        l.overlap = overlap;
        l.prefetch = prefetch;
        l.microbatches = microbatches;
        l.virtual_stages = virtual_stages;
        l.schedule = parse_schedule_kind(schedule);
        l.p2p = parse_p2p_mode(p2p);
        // train's rules, one copy (theory/layout_check.hpp).
        check_degrees(tp, pp, cp, zero, microbatches, sp, prefetch, TensorParallelStyle::megatron);
        resolve_context(p, config);
        if (!stage_layers.empty() && search)
            throw UsageError("--stage-layers with --search: the search cuts balanced stages; drop one of them");
        if (!search) {
            if (tp > cluster.gpus_per_host && !allow_cross_host_tp)
                throw UsageError("--tp " + std::to_string(tp) + " is above --gpus-per-host " +
                                 std::to_string(cluster.gpus_per_host) +
                                 ": tensor parallelism across hosts is slow; lower --tp or add --allow-cross-host-tp");
            check_tensor_split(config, tp, sp, TensorParallelStyle::megatron, l.local_seq_len(), cp);
            // Uneven stages as train takes them (--stage-layers, one count per virtual stage);
            // parbench's own engine's limits only when the plan is of its runs.
            l.stage_ranges = check_pipeline(config, pipeline_request(p));
        }
        l.dp = search ? 1 : check_world(dp, tp, pp, cp, WorldSize{cluster.gpus, "GPUs", "--gpus"});
        if (no_reshard || hybrid_shard) {
            const std::string flag = no_reshard ? "--no-reshard" : "--hybrid-shard";
            if (zero != 3 || p.states == StateConvention::parbench)
                throw UsageError(flag + " models ZeRO-3 as FSDP runs it; add --zero 3 and --states zero|megatron, or drop it");
            if (search) throw UsageError(flag + " with --search: the search tries both for ZeRO-3 layouts; drop it");
            p.reshard_after_forward = !no_reshard;
            if (hybrid_shard) {
                p.shard_group = std::max(1, cluster.gpus_per_host / (tp * cp));
                if (p.shard_group < 2)
                    throw UsageError("--hybrid-shard shards over a host's dp ranks, but --tp " + std::to_string(tp) +
                                     " fills the host; lower --tp or drop --hybrid-shard");
                if (l.dp <= p.shard_group || l.dp % p.shard_group != 0)
                    throw UsageError("--hybrid-shard shards over the " + std::to_string(p.shard_group) +
                                     " dp ranks of a host and replicates across hosts; --dp " + std::to_string(l.dp) +
                                     " must be a larger multiple of it, or drop --hybrid-shard");
            }
        }
        resolve_experts(p, config);
        // Not given: a plan of parbench's own run (--states parbench, one layout) takes train's
        // default, so the same flags count the same bytes; otherwise one sequence per micro-batch
        // per data-parallel rank.
        const bool engine_batch = global_batch <= 0 && !search && p.states == StateConvention::parbench;
        p.global_batch = global_batch > 0 ? global_batch
                         : engine_batch   ? engine_default_global_batch
                                          : std::max(1, l.dp * microbatches);
        if (!search)
            check_global_batch(p.global_batch, l.dp, microbatches,
                               engine_batch ? " (train's default, which --states parbench plans)" : "");
        l.microbatch_size = p.global_batch / l.dp / microbatches;
        // The search forms its own tp degrees (and checks each divides the model): the flags' tp is
        // not one of its layouts, and may not divide the vocabulary.
        const std::size_t parameters =
            model_parameter_layout(config, config.seq_len, search ? TensorSplit{} : TensorSplit{0, tp, sp}).total_numel();
        if (bucket_mb) {
            if (!(*bucket_mb > 0)) throw UsageError("--bucket-mb must be a positive number of MiB");
            l.bucket_bytes = static_cast<std::size_t>(*bucket_mb * 1024.0 * 1024.0);
        } else {
            l.bucket_bytes = default_bucket_bytes(zero, parameters);
        }
        return p;
    }
};

}  // namespace

std::unique_ptr<Command> add_plan_command(CLI::App& app) {
    auto command = std::make_unique<PlanCommand>();
    PlanCommand& c = *command;
    CLI::App* sub = app.add_subcommand("plan", "Predict memory, traffic, bubble and step time of a layout (no MPI)");
    sub->add_option("--model", c.model.model, "Model config NAME or PATH (as train), e.g. gpt3-175b");
    sub->add_option("--params", c.model.params, "Parameter count (7.5B, 350M) for a GPT shape");
    sub->add_option("--layers", c.model.layers, "Transformer layers");
    sub->add_option("--hidden", c.model.hidden, "Hidden size");
    sub->add_option("--heads", c.model.heads, "Attention heads (default hidden/128)");
    sub->add_option("--seq", c.model.seq, "Sequence length (default 2048, or the config's)");
    sub->add_option("--vocab", c.model.vocab, "Vocabulary (default 51200)");
    sub->add_option("--gpus", c.gpus, "GPUs in all (default dp x tp x pp x cp)");
    sub->add_option("--gpus-per-host", c.gpus_per_host, "GPUs per host")->capture_default_str();
    sub->add_option("--device", c.device, "Device preset: A100, H100, H200, B200")->capture_default_str();
    sub->add_option("--cluster", c.cluster_path, "Cluster description JSON (device, gpus, gpus_per_host)");
    sub->add_option("--cores-per-host", c.cores_per_host,
                    "CPU cores a host's ranks share (more ranks than cores: each computes at cores/ranks)");
    sub->add_flag("--allow-cross-host-tp", c.allow_cross_host_tp, "Let tp exceed --gpus-per-host");
    sub->add_option("--dp", c.dp, "Data-parallel degree (default: what the GPUs leave)");
    sub->add_option("--tp", c.tp, "Tensor-parallel degree")->capture_default_str();
    sub->add_option("--pp", c.pp, "Pipeline stages")->capture_default_str();
    sub->add_flag("--sp", c.sp, "Sequence parallelism inside the tp group");
    sub->add_option("--cp", c.cp, "Context-parallel degree (ranks that split every sequence)")->capture_default_str();
    sub->add_option("--cp-style", c.cp_style, "Context-parallel attention: ring (default) or alltoall");
    sub->add_option("--cp-balance", c.cp_balance, "Context-parallel causal balance: zigzag (default) or none");
    sub->add_option("--zero", c.zero, "ZeRO stage 0-3")->capture_default_str();
    sub->add_option("--schedule", c.schedule, "Pipeline schedule: gpipe, 1f1b, interleaved, zb-h1")->capture_default_str();
    sub->add_option("--microbatches", c.microbatches, "Micro-batches per step")->capture_default_str();
    sub->add_option("--stage-layers", c.stage_layers,
                    "Layers per (virtual) stage as train takes them, e.g. 7,8,8,...,7 (default: balanced)")
        ->delimiter(',');
    sub->add_option("--virtual-stages", c.virtual_stages, "Chunks per pipeline rank (interleaved)")->capture_default_str();
    sub->add_option("--global-batch", c.global_batch, "Sequences per step (default: train's, 8, for one layout under --states parbench; dp x microbatches otherwise)");
    sub->add_option("--precision", c.precision,
                    "fp32 or bf16: the matmuls' precision and which peak MFU is against (default: fp32, train's, "
                    "under --states parbench; bf16 otherwise)");
    sub->add_option("--recompute", c.recompute, "Activation recompute: none, selective, full")->capture_default_str();
    sub->add_option("--states", c.states,
                    "Byte convention: zero, megatron, parbench (default: megatron for a bf16 job, parbench for an fp32 "
                    "one or a CPU host with known cores)");
    sub->add_flag("--overlap", c.overlap, "Overlap gradient collectives with backward");
    sub->add_flag("--prefetch", c.prefetch, "ZeRO-3: prefetch the next layer's parameters");
    sub->add_flag("--no-reshard", c.no_reshard,
                  "ZeRO-3 as FSDP without resharding after forward (one gather per layer, parameters kept)");
    sub->add_flag("--hybrid-shard", c.hybrid_shard,
                  "ZeRO-3 as FSDP's hybrid sharding: shard inside a host, replicate across hosts");
    sub->add_option("--bucket-mb", c.bucket_mb, "Gradient bucket in MiB (default as train)");
    sub->add_option("--p2p", c.p2p, "Pipeline transfers: nonblocking or blocking")->capture_default_str();
    sub->add_option("--fbw", c.pass_costs, "F,B,W times of one micro-batch for the schedule simulation");
    sub->add_option("--efficiency", c.efficiency,
                    "One fraction of peak for all compute (default: each GEMM's shape on the device's curve, "
                    "element-wise work at HBM bandwidth; 0.5 on a device without a curve)");
    sub->add_option("--attention", c.attention,
                    "auto, flash (no s x s scores kept, recomputed in backward) or naive. auto: flash for bf16 on a "
                    "GPU device under --states zero|megatron; under --states parbench train's choice (block "
                    "attention from 256 tokens on a CPU host, standard on a GPU)");
    sub->add_option("--gemm-curve", c.gemm_curve, "parbench-ops report whose matmul entries fit the GEMM curve");
    sub->add_option("--calibrate", c.calibrate, "Collective reports (size sweeps) to fit alpha/beta from");
    sub->add_option("--calibrate-compute", c.calibrate_compute, "parbench-ops or train report for the compute rate");
    sub->add_option("--etp", c.etp,
                    "MoE: the experts' tensor parallelism, 1 or the tp degree (default: tp under the frameworks' "
                    "conventions, Megatron-core's; 1 under --states parbench, as train)");
    sub->add_option("--ep", c.ep,
                    "MoE: expert-parallel degree, carved from the dp x cp ranks (divides the experts and dp x cp; default 1)");
    sub->add_option("--moe-imbalance", c.moe_imbalance,
                    "MoE: max/mean tokens per ep rank, what `parbench alltoallv --skew` reports (default 1, balanced)");
    sub->add_flag("--moe-a2a-overlap", c.moe_a2a_overlap,
                  "MoE: train's --moe-a2a-overlap, dispatch and combine in two halves, one overlapping the other's "
                  "expert compute: half of them exposed, the other half hidden up to the step's compute");
    sub->add_flag("--moe-a2a-overlap-1f1b", c.moe_a2a_overlap_1f1b,
                  "MoE: train's --moe-a2a-overlap-1f1b, 1F1B's steady-state forward and backward paired, each "
                  "exchange hidden by the partner pass's compute up to its next switch (a transport that progresses "
                  "on its own: NCCL, a NIC); warm-up, cool-down and the last stage blocking");
    sub->add_flag("--search", c.search, "Rank every layout that divides the GPUs and the model (and ep for MoE)");
    sub->add_option("--top", c.top, "Layouts to show with --search")->capture_default_str();
    sub->add_option("--microbatch-list", c.microbatch_list, "Micro-batch counts --search tries")->capture_default_str();
    sub->add_option("--json", c.json_path, "Write the parbench.plan/v1 document here");
    sub->add_flag("--markdown", c.markdown, "Print a Markdown table");
    return command;
}

}  // namespace parbench

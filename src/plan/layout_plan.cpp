#include "plan/layout_plan.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "plan/layout_comm.hpp"
#include "plan/tp_comm_overlap.hpp"
#include "theory/context_parallel.hpp"
#include "theory/llama_activation_memory.hpp"
#include "theory/model_flops.hpp"
#include "theory/moe_work.hpp"
#include "theory/pipeline/paired_passes.hpp"
#include "theory/pipeline/partition.hpp"
#include "theory/zero_partition.hpp"

namespace parbench {

// Megatron-LM's interleaved schedule runs (p - r - 1) x 2 + (v - 1) x p warm-up forwards on
// rank r before its first backward (at most m x v), each holding one chunk of L / (p v) layers,
// one more in steady state: on rank 0, L (1 + (p - 1) / (p v)) layers of activations (arXiv
// 2205.05198 sec. 4.2.3). parbench's engine holds the same count on equal chunks: one pool per
// rank, its peak held at once (`engine_layers`, theory/pipeline/partition.hpp); uneven chunks
// keep the engine's count, the formula assuming equal ones.
double megatron_interleaved_layers_in_flight(int layers, int p, int v, int m, int pp_rank, double engine_layers) {
    if (layers % (p * v) != 0) return engine_layers;
    const int warmup = std::min((p - pp_rank - 1) * 2 + (v - 1) * p, m * v);
    const int chunks = std::min(warmup + 1, m * v);
    return static_cast<double>(chunks) * layers / (p * v);
}

namespace {

// The whole model's parameters at the layout's tensor and expert split: every pipeline rank's
// memory and traffic select their units from it.
ParameterLayout whole_parameter_layout(const Layout& l) {
    return model_parameter_layout(l.model, l.seq_len, TensorSplit{0, l.tp, l.sp, l.tp_style}, l.expert_split());
}

// The model states of a rank holding `parameters` under the layout's convention, before MoE's
// recount (apply_moe_memory).
ModelStateBytes convention_states(const PlanLayout& p, std::size_t parameters) {
    const Layout& l = p.engine;
    return model_state_bytes(p.states, static_cast<double>(parameters), l.zero,
                             p.shard_group > 0 ? p.shard_group : l.gradient_ranks());
}

PlanMemory convention_memory(const PlanLayout& p, int pp_rank, const EnginePipeline* pipeline,
                             const ParameterLayout& whole) {
    const Layout& l = p.engine;
    const EngineRank rank = engine_rank(l, pp_rank, pipeline, &whole);
    const PerParameterBytes bytes = *state_rules(p.states).per_parameter;
    const ModelStateBytes states = convention_states(p, rank.layout.total_numel());
    PlanMemory m;
    m.pp_rank = pp_rank;
    m.convention = states.rule;
    m.params = states.params;
    m.grads = states.grads;
    m.optimizer = states.optimizer;
    // Activations: the per-layer formula times the layers of each chunk times the micro-batches
    // it holds at the schedule's peak (one at a time without a pipeline).
    const LayerActivationShape shape{static_cast<double>(l.seq_len), static_cast<double>(l.microbatch_size),
                                     static_cast<double>(l.model.hidden), static_cast<double>(l.model.heads), l.tp,
                                     l.sp, l.cp, p.fp8};
    double layer_micro = l.model.layers;
    if (rank.part.active()) {
        // The layers the rank's pool holds at once (every layer one kind: the count, not the bytes).
        layer_micro = activation_pool(rank.part, std::vector<int>(static_cast<std::size_t>(l.model.layers), 0))
                          .layer_stores.at(0);
        const bool even_chunks = std::all_of(l.stage_ranges.begin(), l.stage_ranges.end(), [&](const LayerRange& r) {
            return (r.end - r.first) * l.pp * l.virtual_stages == l.model.layers;
        });
        if (l.schedule == ScheduleKind::interleaved && l.virtual_stages > 1 && even_chunks)
            layer_micro = megatron_interleaved_layers_in_flight(l.model.layers, l.pp, l.virtual_stages, l.microbatches,
                                                                pp_rank, layer_micro);
    }
    // GPT's per-layer formula is the paper's table 2; Llama's is derived the same way from its
    // own items (theory/llama_activation_memory.hpp).
    // Under context parallelism (Llama) the paper's form with s' = s / cp
    // (theory/activation_memory.hpp).
    auto per_layer = [&](Recompute recompute) {
        // Flash attention keeps no s x s scores: what selective recompute keeps (arXiv 2205.05198
        // sec. 5 drops the same tensors; flash's softmax statistics, b x a x s floats, are
        // negligible beside them).
        if (p.engine.attention == AttentionKind::flash && recompute == Recompute::none) recompute = Recompute::selective;
        if (l.model.kind == ModelKind::llama && l.cp == 1)
            return llama_paper_layer_activation_bytes(l.model, l.seq_len, l.microbatch_size, l.tp, l.sp, recompute, p.fp8);
        return LayerActivationBytes{paper_layer_activation_bytes(shape, recompute),
                                    paper_layer_activation_formula(l.tp > 1, l.sp, recompute, l.cp, p.fp8)};
    };
    const LayerActivationBytes layer = per_layer(l.recompute);
    m.activation_bytes_per_layer = layer.bytes;
    m.activations = layer_micro * layer.bytes;
    // Full recompute rebuilds one layer's activations at a time during backward.
    if (l.recompute == Recompute::full) m.activations += per_layer(Recompute::none).bytes;
    m.activation_formula = layer.formula + " x layers x micro-batches in flight";
    // Op-level recompute rebuilds, one layer at a time, what that layer's backward needs and it did not keep.
    if (l.recompute == Recompute::selective_op) {
        const LayerActivationBytes rebuilt = llama_op_recompute_rebuilt_bytes(l.model, l.seq_len, l.microbatch_size);
        m.activations += rebuilt.bytes;
        m.activation_formula += " + " + rebuilt.formula;
    }
    // parbench's schemes' working buffers in the convention's bytes: gradient bucket slots
    // (ZeRO-2/3) and parameter gather slots (ZeRO-3).
    if (l.zero >= 2 && l.gradient_ranks() > 1) {
        const FlatLayout flat(rank.layout,
                              l.zero == 3 ? one_unit_per_group(rank.layout) : group_units_by_bytes(rank.layout, l.bucket_bytes),
                              l.gradient_ranks());
        const double slot = static_cast<double>(flat.largest_segment_numel());
        m.buffers += zero_gradient_slots(l.overlap) * slot * bytes.grads;
        if (l.zero == 3) m.buffers += zero_gather_slots(1, l.prefetch) * slot * bytes.params;
    }
    // FSDP without resharding after forward holds every layer's gathered parameters at the peak.
    if (l.zero == 3 && !p.reshard_after_forward)
        m.buffers += static_cast<double>(rank.layout.total_numel()) * bytes.params - m.params;
    // FP8: the weights' FP8 copies and transposes, 2 B per parameter on the rank (plan/layout_plan.hpp).
    if (p.fp8) m.buffers += 2.0 * static_cast<double>(rank.layout.total_numel());
    if (p.experts.active()) apply_moe_memory(m, p, static_cast<double>(rank.layout.total_numel()), layer_micro);
    m.total = m.params + m.grads + m.optimizer + m.activations + m.buffers;
    return m;
}

PlanMemory engine_memory(const PlanLayout& p, const EnginePipeline* pipeline) {
    RankMemory rank = engine_rank_memory(p.engine, 0, pipeline);
    for (int r = 1; r < p.engine.pp; ++r) {
        RankMemory other = engine_rank_memory(p.engine, r, pipeline);
        if (other.total() > rank.total()) rank = std::move(other);
    }
    PlanMemory m;
    m.pp_rank = rank.pp_rank;
    m.params = rank.of(MemoryCategory::params);
    m.grads = rank.of(MemoryCategory::grads);
    m.optimizer = rank.of(MemoryCategory::optimizer);
    m.activations = rank.of(MemoryCategory::activations);
    for (const MemoryItem& item : rank.items)
        if (item.buffer) m.buffers += item.bytes();
    m.total = rank.total();
    m.items = rank.items;
    m.convention = "parbench: every buffer parbench's train allocates (fp32 master parameters, gradients and AdamW "
                   "state, bucket and gather slots, activations as stored; bf16 adds operand copies), "
                   "theory/memory.hpp";
    m.activation_formula = "parbench's stored activations (fp32), counted per buffer";
    return m;
}

double sum_time_ms(const std::vector<CommLine>& lines, const std::string& dimension) {
    double ms = 0;
    for (const CommLine& line : lines)
        if (line.dimension == dimension) ms += line.time_ms;
    return ms;
}

}  // namespace

double zero3_exposed_ms(double gather_ms, double gather_calls, double reduce_ms, double reduce_calls,
                        double forward_ms, double backward_ms, bool reshard_after_forward, int microbatches,
                        double backward_regather_ms) {
    // Each unit is gathered once for the forward and again for the backward (resharded after the
    // forward), and its gradient reduce-scattered once (arXiv 2304.11277 sec. 3.3, FSDP's
    // prefetching; ZeRO-3, arXiv 1910.02054 sec. 5.3). Uniform units: per unit gather g, reduce r,
    // forward compute c_f and backward compute c_b. Every micro-batch runs its own forward and
    // backward, and each starts on a gather no compute before it hides: DeepSpeed resets its
    // coordinator (prefetch queue and all) at every forward (parameter_offload.py's
    // _start_of_forward_hook, PartitionedParameterCoordinator.reset_step), FSDP unshards its
    // first unit in each forward's and each backward's pre-hook; and each backward ends waiting
    // for its last reduce-scatter (DeepSpeed's stage3.py independent_gradient_partition_epilogue,
    // "called after every backward", synchronizes its reduce stream; FSDP's post-backward final
    // callback waits for its reduce-scatter stream).
    const double m = microbatches;
    const double forward_units = reshard_after_forward ? gather_calls / 2.0 : gather_calls;
    const double g = gather_ms / gather_calls, r = reduce_ms / reduce_calls;
    const double c_f = forward_ms / forward_units;
    if (!reshard_after_forward) {
        // Gathered once: the backward only reduce-scatters, each behind the next unit's compute.
        const double c_b = backward_ms / reduce_calls;
        return m * g + (forward_units - m) * std::max(0.0, g - c_f) + (reduce_calls - m) * std::max(0.0, r - c_b) +
               m * r;
    }
    const double backward_units = gather_calls - forward_units;
    const double c_b = backward_ms / backward_units;
    // Forward: the first gather is exposed; the gather of unit i+1 hides behind unit i's compute
    // and no more.
    const double forward = m * g + (forward_units - m) * std::max(0.0, g - c_f);
    // Backward: the next unit's gather, the previous unit's reduce-scatter and this unit's
    // re-gather (DeepSpeed under full recompute, spread evenly) share the link while a unit
    // computes; each backward's first gather and last reduce-scatter are exposed.
    const double windows = backward_units - m;
    const double x = windows > 0 ? backward_regather_ms / windows : backward_regather_ms;
    const double backward = m * g + windows * std::max(0.0, g + r + x - c_b) + (windows > 0 ? 0.0 : x) + m * r;
    return forward + backward;
}

ModelStateBytes model_state_bytes(StateConvention states, double psi, int zero, int dp) {
    const StateRules& rules = state_rules(states);
    if (!rules.per_parameter)
        throw std::logic_error("model_state_bytes: parbench's states are counted per buffer (engine_rank_memory)");
    const PerParameterBytes bytes = *rules.per_parameter;
    const ModelStates partitioned =
        zero_partitioned_states({bytes.params, bytes.grads, bytes.optimizer}, psi, zero, static_cast<double>(dp));
    ModelStateBytes m;
    m.rule = rules.rule_text(zero);
    m.params = partitioned.params;
    m.grads = partitioned.grads;
    m.optimizer = partitioned.optimizer;
    return m;
}

PlanMemory plan_memory(const PlanLayout& p, const EnginePipeline* shared) {
    std::optional<EnginePipeline> built;
    if (shared == nullptr && p.engine.pp > 1) shared = &built.emplace(*engine_pipeline(p.engine));
    if (!state_rules(p.states).per_parameter) return engine_memory(p, shared);
    const ParameterLayout whole = whole_parameter_layout(p.engine);
    PlanMemory peak = convention_memory(p, 0, shared, whole);
    for (int r = 1; r < p.engine.pp; ++r) {
        PlanMemory m = convention_memory(p, r, shared, whole);
        if (m.total > peak.total) peak = std::move(m);
    }
    return peak;
}

double plan_memory_floor(const PlanLayout& p) {
    const Layout& l = p.engine;
    double floor = 0;
    if (!state_rules(p.states).per_parameter) {
        for (int r = 0; r < l.pp; ++r) floor = std::max(floor, engine_rank_state_bytes(l, r));
        return floor;
    }
    // MoE's convention recounts the states from the rank's layers (apply_moe_memory): no floor here.
    if (p.experts.active()) return 0;
    const ParameterLayout whole = whole_parameter_layout(l);
    for (int r = 0; r < l.pp; ++r) {
        // The rank's parameters: its units' (engine_rank's layout selects them), summed.
        PipelinePart part;
        part.chunks = engine_rank_chunks(l, r);
        std::size_t parameters = 0;
        for (const int unit : pipeline_part_units(l.model, part))
            parameters += whole.units().at(static_cast<std::size_t>(unit)).numel;
        // convention_memory's first three terms, summed in its order: its total adds only
        // non-negative terms to them, so it is never below this (rounding is monotonic).
        const ModelStateBytes states = convention_states(p, parameters);
        floor = std::max(floor, states.params + states.grads + states.optimizer);
    }
    return floor;
}

double plan_memory_reserved(const PlanLayout& p, const ClusterSpec& cluster) {
    return state_rules(p.states).loses_device_reserve ? cluster.device.memory_reserved_gib * 1024.0 * 1024.0 * 1024.0
                                                       : 0.0;
}

double plan_memory_capacity(const PlanLayout& p, const ClusterSpec& cluster) {
    return cluster.device.memory_gib * 1024.0 * 1024.0 * 1024.0 - plan_memory_reserved(p, cluster);
}

namespace {

// predict_layout's stages, in the order it runs them: memory, traffic priced into comm lines
// (plan/layout_comm.hpp), compute, the pipeline's bubble, the optimizer, what each dimension
// leaves exposed, and the rates. Each fills its part of the prediction.

void predict_memory(PlanPrediction& out, const PlanLayout& p, const ClusterSpec& cluster, const EnginePipeline* shared,
                    const PlanMemory* memory) {
    out.memory = memory ? *memory : plan_memory(p, shared);
    out.memory_reserved = plan_memory_reserved(p, cluster);
    out.memory_capacity = plan_memory_capacity(p, cluster);
    out.fits = out.memory.total <= out.memory_capacity;
}

const StageCompute& busiest_stage(const std::vector<StageCompute>& stages) {
    const StageCompute* busiest = &stages.front();
    for (const StageCompute& stage : stages)
        if (stage.total_ms() > busiest->total_ms()) busiest = &stage;
    return *busiest;
}

// Model FLOPs and the busiest rank's compute time, on the device's compute model or at the
// measured rate. Returns each pipeline rank's F, B, W per chunk from its own work, when modelled:
// stages of unequal work (the embedding on the first, the head on the last) simulated as they are.
std::vector<PassCosts> predict_compute(PlanPrediction& out, const PlanLayout& p, const PlanContext& context,
                                       const EnginePipeline* pipeline) {
    const Layout& l = p.engine;
    const int world = l.dp * l.tp * l.pp * l.cp;
    out.flops_per_step = p.experts.active() ? moe_model_flops_per_step(*p.experts.model, p.engine.global_batch, l.seq_len)
                                            : model_flops_per_step(l.model, p.engine.global_batch, l.seq_len);
    // Ranks that outnumber their host's cores compute at cores / ranks of the unshared rate.
    out.compute_share = compute_share(context.cluster, world);
    std::vector<PassCosts> work_costs;
    if (context.device_compute) {
        DeviceCompute device = *context.device_compute;
        device.fp8_linear = p.fp8;
        out.stages = stage_compute(l, p.engine.attention, device, &p.experts, p.states != StateConvention::parbench,
                                   p.eager_elementwise);
        out.contention_by_pp_rank = apply_host_contention(out.stages, l, l.pp > 1 ? &pipeline->schedule : nullptr,
                                                          context.contention, out.compute_share);
        for (const StageCompute& stage : out.stages)
            out.hardware_flops_per_step += stage.gemm_flops * l.microbatches * l.dp * l.cp * l.tp;
        out.compute_ms = l.microbatches * busiest_stage(out.stages).total_ms() / out.compute_share.share;
        if (l.pp > 1) work_costs = pipeline_pass_costs(out.stages, l.virtual_stages, pipeline->schedule.split_backward);
    } else {
        // Recompute repeats forward work (train/metrics.hpp counts it for HFU); a train report's
        // rate was measured on its own run, recompute and all, and is taken as it is.
        out.hardware_flops_per_step = out.flops_per_step;
        if (!context.rate.includes_optimizer)
            out.hardware_flops_per_step +=
                p.experts.active() ? moe_recompute_flops_per_step(*p.experts.model, p.engine.global_batch, l.seq_len, l.recompute)
                                   : recompute_flops_per_step(l.model, p.engine.global_batch, l.seq_len, l.recompute);
        const double rank_tflops = context.rate.tflops_per_gpu * out.compute_share.share;
        out.compute_ms = out.hardware_flops_per_step / (world * rank_tflops * 1e12) * 1e3;
    }
    return work_costs;
}

// FSDP2's per-parameter sharding copies (plan/layout_plan.hpp): every byte a dp gather brings in
// is copied out to its parameter, every byte a reduce-scatter sends copied in first, each read
// and written once, on the compute stream.
void add_fsdp_copies(PlanPrediction& out, const PlanLayout& p, const PlanContext& context) {
    const Layout& l = p.engine;
    if (!(l.zero == 3 && state_rules(p.states).zero3_copies_per_parameter && l.gradient_ranks() > 1)) return;
    double copied = 0;
    for (const CommLine& line : out.comm)
        if (line.dimension == "dp" && (line.collective == "allgather" || line.collective == "reducescatter"))
            copied += 2.0 * line.bytes;
    const double gbps = context.cluster.device.memory_bandwidth_gbps *
                        (context.device_compute ? context.device_compute->memory_fraction : 0.8);
    out.fsdp_copy_ms = copied / (gbps * 1e9) * 1e3 / out.compute_share.share;
    out.compute_ms += out.fsdp_copy_ms;
}

// Each pipeline rank's passes, and the schedule's bubble: its formula, simulated on the given or
// the stages' own pass costs when there are some.
void predict_bubble(PlanPrediction& out, const PlanLayout& p, const PlanContext& context,
                    const EnginePipeline* pipeline, const std::vector<PassCosts>& work_costs) {
    const Layout& l = p.engine;
    out.passes_by_pp_rank = l.pp > 1 ? pipeline->passes
                                     : std::vector<PassCounts>{unpipelined_pass_counts(l.microbatches)};
    if (l.pp <= 1) return;
    const ScheduleShape shape{l.pp, l.microbatches, l.virtual_stages};
    const Schedule& schedule = pipeline->schedule;
    out.bubble_formula = theoretical_bubble(l.schedule, shape);
    out.bubble_formula_text = bubble_formula(l.schedule);
    out.bubble_simulated = out.bubble_formula;
    out.bubble_ms = -1;
    if (context.pass_costs_given || context.simulate_balanced) {
        const bool own_costs = !context.pass_costs_given && !work_costs.empty();
        const SimulationResult simulated =
            own_costs ? simulate_schedule(schedule, l.p2p, work_costs)
                      : simulate_schedule(schedule, l.p2p,
                                          context.pass_costs_given ? context.pass_costs : balanced_costs(schedule));
        if (simulated.completed) {
            out.bubble_simulated = simulated.bubble();
            // In the work's own milliseconds the step's compute and bubble are the makespan:
            // the busiest rank idles for what is left of it.
            if (own_costs)
                out.bubble_ms = (simulated.makespan - *std::max_element(simulated.busy.begin(), simulated.busy.end())) /
                                out.compute_share.share;
        }
    }
    if (out.bubble_ms < 0) out.bubble_ms = out.compute_ms * out.bubble_simulated / (1.0 - out.bubble_simulated);
}

// The optimizer's step over the states the rank owns: 28 bytes per parameter through memory.
void predict_optimizer(PlanPrediction& out, const PlanLayout& p, const PlanContext& context, const EngineRank& rank) {
    const Layout& l = p.engine;
    if (context.rate.includes_optimizer) return;
    double owned = static_cast<double>(rank.layout.total_numel()) / (l.zero >= 1 ? l.gradient_ranks() : 1);
    // Dense states sharded over dp x cp, the experts' (E/ep of them) over their own group.
    if (p.experts.active())
        owned = out.moe.dense_parameters_rank / (l.zero >= 1 ? l.gradient_ranks() : 1) +
                out.moe.expert_parameters_rank / (l.zero >= 1 ? expert_data_parallel(p) : 1);
    const double gbps = context.rate.optimizer_gbps ? *context.rate.optimizer_gbps : context.cluster.device.memory_bandwidth_gbps;
    out.optimizer_ms = owned * 28.0 / (gbps * 1e9 * out.compute_share.share) * 1e3;
}

// The exposed tp time. Under tp comm overlap the sequence-parallel all-gathers and
// reduce-scatters are each overlapped with the linear GEMM Transformer Engine pairs them with, on
// the busiest stage (plan/tp_comm_overlap.hpp: its methods, SM margin and chunk overheads are
// priced there, so the hidden tp time takes no overlap slowdown); the rest (all-reduces, the
// collectives no TE GEMM carries) stays exposed. Without the SM margin (PlanLayout's
// tp_comm_sm_margin) the GEMMs take every SM and the tp time hidden by communication on SMs
// (pipelined and bulk) is returned, to slow the compute beside it as the other hidden
// collectives do; else 0.
double expose_tp(PlanPrediction& out, const PlanLayout& p, const std::optional<DeviceCompute>& device) {
    const Layout& l = p.engine;
    out.exposed_tp_ms = sum_time_ms(out.comm, "tp");
    if (!(l.tp_comm_overlap && l.tp > 1 && !out.stages.empty())) return 0.0;
    double ag_ms = 0, ag_calls = 0, rs_ms = 0, rs_calls = 0;
    for (const CommLine& line : out.comm) {
        if (line.dimension != "tp") continue;
        if (line.collective == "allgather") ag_ms += line.time_ms, ag_calls += line.calls;
        if (line.collective == "reducescatter") rs_ms += line.time_ms, rs_calls += line.calls;
    }
    std::vector<TpOverlapGemm> pairs = busiest_stage(out.stages).tp_overlap_gemms;
    for (TpOverlapGemm& pair : pairs) pair.gemm_ms /= out.compute_share.share, pair.count *= l.microbatches;
    const TpOverlapDevice costs{device && p.tp_comm_sm_margin ? device->sms : 0.0,
                                device ? device->gemm.overhead_us * 1e-3 : 0.0};
    const TpOverlapStep step = tp_overlap_step(pairs, ag_ms, ag_calls, rs_ms, rs_calls, l.tp, costs);
    out.exposed_tp_ms += step.exposed_ms - (ag_ms + rs_ms);
    return p.tp_comm_sm_margin ? 0.0 : step.hidden_on_sms_ms;
}

// The exposed dp (and edp) time: ZeRO-3's prefetched gathers and reduce-scatters unit by unit
// (zero3_exposed_ms), else what the backward and the step's compute leave of the reduces and
// gathers (Megatron-core's distributed optimizer gathers behind the next step's first forward,
// plan/layout_comm.hpp). Returns what the compute hid of them.
double expose_dp(PlanPrediction& out, const PlanLayout& p, double rank_parameters,
                 std::optional<std::size_t> regather_line) {
    const Layout& l = p.engine;
    // The forward's share of compute: the busiest stage's F with a compute model, else 1/3.
    double forward_ms = out.compute_ms / 3.0;
    if (!out.stages.empty())
        forward_ms = l.microbatches * busiest_stage(out.stages).forward_ms / out.compute_share.share;
    const double backward_ms = out.compute_ms - forward_ms;
    double reduce_ms = 0, gather_ms = 0, largest_reduce_ms = 0, largest_gather_ms = 0;
    double reduce_calls = 0, gather_calls = 0;
    // DeepSpeed's re-gathers fall in the backward only: apart from the per-unit gathers.
    const double regather_ms = regather_line ? out.comm[*regather_line].time_ms : 0.0;
    for (std::size_t i = 0; i < out.comm.size(); ++i) {
        const CommLine& line = out.comm[i];
        // parbench's routed experts reduce over their own group in the same backward.
        if (line.dimension != "dp" && line.dimension != "edp") continue;
        if (regather_line && i == *regather_line) continue;
        const double each = line.time_ms / line.calls;
        if (line.collective == "allgather") {
            gather_ms += line.time_ms;
            gather_calls += line.calls;
            largest_gather_ms = std::max(largest_gather_ms, each);
        } else {
            reduce_ms += line.time_ms;
            // ZeRO-3's all-reduce is hybrid sharding's, one per unit and step after its
            // reduce-scatters: time on the same link, no units of its own.
            if (!(l.zero == 3 && line.collective == "allreduce")) reduce_calls += line.calls;
            largest_reduce_ms = std::max(largest_reduce_ms, each);
        }
    }
    const double reduce_ms_total = reduce_ms, gather_ms_total = gather_ms + regather_ms;
    if (l.zero == 3 && l.prefetch && l.overlap && l.gradient_ranks() > 1 && gather_calls >= 2 && reduce_calls > 0) {
        // The replicas' all-reduce (hybrid sharding) follows each reduce-scatter on the same link.
        out.exposed_dp_ms = zero3_exposed_ms(gather_ms, gather_calls, reduce_ms, reduce_calls, forward_ms, backward_ms,
                                             p.reshard_after_forward, l.microbatches, regather_ms);
    } else {
        gather_ms += regather_ms;
        // Gradients accumulated over micro-batches are reduced once, in the last micro-batch's
        // backward (PyTorch DDP's no_sync, Megatron-core's DDP, parbench's ddp and ZeRO-1): only
        // that backward hides them. ZeRO-2 reduce-scatters every micro-batch's gradients in its
        // own backward.
        const double reduce_window_ms = l.zero >= 2 ? backward_ms : backward_ms / l.microbatches;
        if (l.overlap && l.gradient_ranks() > 1) reduce_ms = std::max(largest_reduce_ms, reduce_ms - reduce_window_ms);
        if (l.zero == 3 && l.prefetch && l.gradient_ranks() > 1)
            gather_ms = std::max(largest_gather_ms, gather_ms - out.compute_ms);
        if (l.zero == 1 && l.overlap && state_rules(p.states).param_gather_behind_forward && gather_ms > 0)
            gather_ms = megatron_param_gather_exposed_ms(
                gather_ms, megatron_ddp_buckets(rank_parameters, l.gradient_ranks()), forward_ms / l.microbatches);
        out.exposed_dp_ms = reduce_ms + gather_ms;
    }
    return std::max(0.0, reduce_ms_total + gather_ms_total - out.exposed_dp_ms);
}

// The exposed pp time: non-blocking sends expose the warm-up's and cool-down's only. Returns
// what the compute hid.
double expose_pp(PlanPrediction& out, const Layout& l) {
    double pp_ms = 0;
    for (const CommLine& line : out.comm) {
        if (line.dimension != "pp") continue;
        pp_ms += line.time_ms;
        if (line.collective == "send" && l.p2p == P2pMode::nonblocking)
            out.exposed_pp_ms += std::min(line.calls, 2.0 * (l.pp - 1)) * line.time_ms / line.calls;
        else
            out.exposed_pp_ms += line.time_ms;
    }
    return std::max(0.0, pp_ms - out.exposed_pp_ms);
}

// The exposed ep time under the all-to-all overlaps; returns what the compute hid.
double expose_ep(PlanPrediction& out, const PlanLayout& p, const PlanContext& context, const EnginePipeline* pipeline) {
    const Layout& l = p.engine;
    double hidden_ep_ms = 0;
    if (p.engine.moe.a2a_overlap && out.exposed_ep_ms > 0) {
        // Under parbench's states the ep lines are train's: the counts' alltoall blocks, the
        // alltoallv halves overlap; Megatron-core's one line is dispatch and combine.
        double blocking_ms = 0, overlappable_ms = 0;
        for (const CommLine& line : out.comm) {
            if (line.dimension != "ep") continue;
            const bool counts = p.states == StateConvention::parbench && line.collective == "alltoall";
            (counts ? blocking_ms : overlappable_ms) += line.time_ms;
        }
        out.exposed_ep_ms = moe_overlapped_exposure(blocking_ms, overlappable_ms, out.compute_ms);
        hidden_ep_ms = std::max(0.0, blocking_ms + overlappable_ms - out.exposed_ep_ms);
    }
    if (p.engine.moe.a2a_overlap_1f1b && out.exposed_ep_ms > 0 && l.pp > 1) {
        // 1F1B's paired steps (plan/moe_plan.hpp): each stretch of compute between two exchanges
        // timed as the step's compute is, on the device's model or at the rate.
        const auto pass_ms = [&](const PassWork& work) {
            const double ms = context.device_compute ? context.device_compute->pass_ms(work)
                                                     : work.flops() / (context.rate.tflops_per_gpu * 1e12) * 1e3;
            return ms / out.compute_share.share;
        };
        hidden_ep_ms = apply_moe_a2a_overlap_1f1b(out, moe_exchange_stretches(l, p.engine.attention, p.experts, pass_ms,
                                                                             p.states != StateConvention::parbench),
                                                  paired_groups_per_rank(pipeline->schedule, l.p2p));
    }
    return hidden_ep_ms;
}

// The step and its rates: time, tokens per second and MFU at the device's peak.
void predict_rates(PlanPrediction& out, const PlanLayout& p, const ClusterSpec& cluster) {
    const Layout& l = p.engine;
    const int world = l.dp * l.tp * l.pp * l.cp;
    out.step_ms = out.compute_ms + out.bubble_ms + out.optimizer_ms + out.exposed_ms() + out.overlap_slowdown_ms;
    const double tokens = static_cast<double>(p.engine.global_batch) * (l.model.kind != ModelKind::mlp ? l.seq_len : 1);
    out.tokens_per_s = tokens / (out.step_ms / 1e3);
    const double peak = l.precision == Precision::bf16 ? cluster.device.peak_tflops_bf16 : cluster.device.peak_tflops_fp32;
    out.mfu = peak > 0 ? out.flops_per_step / (out.step_ms / 1e3 * world * peak * 1e12) : 0.0;
}

}  // namespace

PlanPrediction predict_layout(const PlanLayout& p, const PlanContext& context, const EnginePipeline* shared,
                              const PlanMemory* memory) {
    const Layout& l = p.engine;
    PlanPrediction out;
    out.layout = p;
    std::optional<EnginePipeline> built;
    if (shared == nullptr && l.pp > 1) shared = &built.emplace(*engine_pipeline(l));
    predict_memory(out, p, context.cluster, shared, memory);
    const ParameterLayout whole = whole_parameter_layout(l);
    const EngineRank rank = engine_rank(l, out.memory.pp_rank, shared, &whole);

    const std::optional<std::size_t> regather_line = predict_comm(out, p, context, whole, rank);
    const std::vector<PassCosts> work_costs = predict_compute(out, p, context, shared);
    add_fsdp_copies(out, p, context);
    predict_bubble(out, p, context, shared, work_costs);
    predict_optimizer(out, p, context, rank);

    out.exposed_cp_ms = sum_time_ms(out.comm, "cp");
    out.host_overlap = host_overlap(context.cluster, out.compute_share);
    double hidden_tp_ms = 0, hidden_dp_ms = 0, hidden_pp_ms = 0, hidden_ep_ms = 0;
    if (out.host_overlap.hides_nothing) {
        out.exposed_tp_ms = sum_time_ms(out.comm, "tp");
        out.exposed_dp_ms = sum_time_ms(out.comm, "dp") + sum_time_ms(out.comm, "edp");
        out.exposed_pp_ms = sum_time_ms(out.comm, "pp");
    } else {
        hidden_tp_ms = expose_tp(out, p, context.device_compute);
        hidden_dp_ms = expose_dp(out, p, static_cast<double>(rank.layout.total_numel()), regather_line);
        hidden_pp_ms = expose_pp(out, l);
        hidden_ep_ms = expose_ep(out, p, context, shared);
    }
    // What the collectives hid, they took from the compute beside them (arXiv 2507.03114): on a
    // GPU's compute model, that compute runs overlap_compute_slowdown slower for as long as the
    // hidden collectives (dp, pp, the overlapped all-to-alls, tp beside GEMMs on every SM) last.
    // A measured rate (a train report) holds its own slowdown already.
    if (context.device_compute)
        out.overlap_slowdown_ms =
            overlap_compute_slowdown * std::min(hidden_tp_ms + hidden_dp_ms + hidden_pp_ms + hidden_ep_ms, out.compute_ms);
    predict_rates(out, p, context.cluster);
    return out;
}

std::string layout_label(const PlanLayout& p) {
    const Layout& l = p.engine;
    std::ostringstream label;
    label << "dp" << l.dp << " tp" << l.tp << (l.sp ? "+sp" : "") << " pp" << l.pp;
    if (l.cp > 1) label << " cp" << l.cp << " " << context_style_name(l.cp_style) << (l.cp_balance == ContextBalance::none ? " unbalanced" : "");
    if (l.pp > 1) {
        label << " " << schedule_kind_name(l.schedule);
        if (l.virtual_stages > 1) label << " v" << l.virtual_stages;
    }
    label << " m" << l.microbatches << " mbs" << l.microbatch_size << " z" << l.zero;
    if (l.overlap) label << " overlap";
    if (l.prefetch) label << " prefetch";
    if (l.tp_comm_overlap) label << (p.tp_comm_sm_margin ? " tp-overlap" : " tp-overlap-shared-sms");
    if (p.fp8) label << " fp8";
    if (l.zero == 3 && !p.reshard_after_forward) label << " no-reshard";
    if (p.shard_group > 0) label << " hybrid" << p.shard_group;
    if (p.experts.has_experts()) label << " ep" << p.engine.ep;
    if (p.engine.moe.a2a_overlap_1f1b) label << " a2a-1f1b";
    return label.str();
}

nlohmann::json to_json(const PlanPrediction& p) {
    const Layout& l = p.layout.engine;
    nlohmann::json items = nlohmann::json::array();
    for (const MemoryItem& item : p.memory.items)
        items.push_back({{"category", memory_category_name(item.category)}, {"name", item.name},
                         {"count", item.count}, {"bytes_each", item.bytes_each}, {"bytes", item.bytes()},
                         {"buffer", item.buffer}});
    nlohmann::json comm = nlohmann::json::array();
    for (const CommLine& line : p.comm)
        comm.push_back({{"dimension", line.dimension}, {"collective", line.collective}, {"calls", line.calls},
                        {"bytes", line.bytes}, {"group", line.group}, {"placement", placement_name(line.placement)},
                        {"time_ms", line.time_ms}, {"source", line.source}});
    nlohmann::json by_rank = nlohmann::json::array();
    for (std::size_t r = 0; r < p.traffic_by_pp_rank.size(); ++r) {
        nlohmann::json entry = {{"pp_rank", r}};
        for (const auto& [dimension, traffic] : p.traffic_by_pp_rank[r]) {
            entry[dimension] = nlohmann::json::object();
            for (const auto& [op, volume] : traffic) entry[dimension][op] = {{"calls", volume.calls}, {"bytes", volume.bytes}};
        }
        by_rank.push_back(entry);
    }
    nlohmann::json passes = nlohmann::json::array();
    for (std::size_t r = 0; r < p.passes_by_pp_rank.size(); ++r) {
        const PassCounts& c = p.passes_by_pp_rank[r];
        passes.push_back({{"pp_rank", r}, {"forward", c.forward}, {"input_grad", c.input_grad},
                          {"weight_grad", c.weight_grad}, {"weight_grad_deferred", c.weight_grad_deferred}});
    }
    nlohmann::json stages = nlohmann::json::array();
    for (const StageCompute& stage : p.stages)
        stages.push_back({{"pp_rank", stage.pp_rank}, {"layers", stage.layers},
                          {"per_microbatch_ms",
                           {{"forward", stage.forward_ms}, {"input_grad", stage.input_grad_ms},
                            {"weight_grad", stage.weight_grad_ms}, {"recompute", stage.recompute_ms}}},
                          {"flops_per_microbatch", stage.gemm_flops}});
    return {{"label", layout_label(p.layout)},
            {"layout",
             {{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"sp", l.sp}, {"cp", l.cp},
              {"cp_style", l.cp > 1 ? nlohmann::json(context_style_name(l.cp_style)) : nlohmann::json(nullptr)},
              {"cp_balance", l.cp > 1 ? nlohmann::json(context_balance_name(l.cp_balance)) : nlohmann::json(nullptr)},
              {"zero", l.zero},
              {"schedule", l.pp > 1 ? schedule_kind_name(l.schedule) : "none"}, {"virtual_stages", l.virtual_stages},
              {"microbatches", l.microbatches}, {"microbatch_size", l.microbatch_size},
              {"global_batch", p.layout.engine.global_batch}, {"overlap", l.overlap}, {"prefetch", l.prefetch},
              {"bucket_mb", static_cast<double>(l.bucket_bytes) / (1024.0 * 1024.0)},
              {"precision", l.precision == Precision::bf16 ? "bf16" : "fp32"},
              {"recompute", recompute_name(l.recompute)}, {"p2p", p2p_mode_name(l.p2p)},
              {"attention", attention_name(p.layout.engine.attention)},
              {"reshard_after_forward", p.layout.reshard_after_forward}, {"shard_group", p.layout.shard_group},
              {"tp_comm_overlap", l.tp_comm_overlap}, {"tp_comm_sm_margin", p.layout.tp_comm_sm_margin},
              {"fp8", p.layout.fp8},
              {"ep", p.layout.engine.ep}, {"moe_a2a_overlap", p.layout.engine.moe.a2a_overlap},
              {"moe_a2a_overlap_1f1b", p.layout.engine.moe.a2a_overlap_1f1b}}},
            {"memory_bytes",
             {{"states", states_name(p.layout.states)}, {"pp_rank", p.memory.pp_rank}, {"params", p.memory.params},
              {"grads", p.memory.grads}, {"optimizer", p.memory.optimizer}, {"activations", p.memory.activations},
              {"buffers", p.memory.buffers}, {"total", p.memory.total}, {"capacity", p.memory_capacity}, {"reserved", p.memory_reserved},
              {"fits", p.fits}, {"convention", p.memory.convention},
              {"activation_formula", p.memory.activation_formula},
              {"activation_bytes_per_layer", p.memory.activation_bytes_per_layer}, {"items", items}}},
            {"comm", comm},
            {"traffic_by_pp_rank", by_rank},
            {"passes_by_pp_rank", passes},
            {"bubble",
             {{"formula", p.bubble_formula}, {"formula_text", p.bubble_formula_text},
              {"simulated", p.bubble_simulated}}},
            {"time_ms",
             {{"compute", p.compute_ms}, {"bubble", p.bubble_ms}, {"optimizer", p.optimizer_ms},
              {"exposed_tp", p.exposed_tp_ms}, {"exposed_dp", p.exposed_dp_ms}, {"exposed_pp", p.exposed_pp_ms},
              {"exposed_cp", p.exposed_cp_ms}, {"exposed_ep", p.exposed_ep_ms},
              {"overlap_slowdown", p.overlap_slowdown_ms},
              {"step", p.step_ms}}},
            {"compute_sharing",
             {{"ranks_per_host", p.compute_share.ranks_per_host},
              {"cores_per_host",
               p.compute_share.cores_per_host > 0 ? nlohmann::json(p.compute_share.cores_per_host) : nlohmann::json(nullptr)},
              {"share", p.compute_share.share},
              {"oversubscribed", p.compute_share.oversubscribed()},
              {"contention_by_pp_rank", p.contention_by_pp_rank},
              {"overlap_hides_nothing", p.host_overlap.hides_nothing ? nlohmann::json(p.host_overlap.reason)
                                                                     : nlohmann::json(nullptr)},
              {"rule", "each rank computes (model FLOPs and optimizer) at cores/ranks of the unshared rate when a "
                       "host's ranks outnumber its cores (the scheduler time-slices them), else at the whole rate"}}},
            {"fsdp_copies_ms", p.fsdp_copy_ms},  // inside time_ms.compute
            {"flops_per_step", p.flops_per_step},
            {"hardware_flops_per_step", p.hardware_flops_per_step},
            {"stages", stages},
            {"tokens_per_s", p.tokens_per_s},
            {"mfu", p.mfu},
            {"mfu_parameters", p.moe.active ? "active" : "all"},
            {"moe", p.moe.active ? to_json(p.moe) : nlohmann::json(nullptr)}};
}

}  // namespace parbench

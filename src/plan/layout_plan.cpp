#include "plan/layout_plan.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "core/error.hpp"
#include "theory/context_parallel.hpp"
#include "theory/llama_activation_memory.hpp"
#include "theory/model_flops.hpp"

namespace parbench {
namespace {

struct StateBytes {
    double params, grads, optimizer;  // per parameter
    std::string rule;
};

StateBytes state_bytes(StateConvention states, int zero) {
    if (states == StateConvention::zero)
        return {2, 2, 12, "ZeRO (arXiv 1910.02054 sec. 3.1): fp16 parameters 2 B + fp16 gradients 2 B + fp32 "
                          "parameters, momentum, variance 12 B = 16 B/param; / dp for the partitioned states"};
    const bool distributed = zero >= 1;
    return {2, 4, 12, std::string("Megatron-LM's theoretical memory: bf16 parameters 2 B + fp32 gradients 4 B + fp32 "
                                  "main parameters and Adam 12 B = 18 B/param") +
                          (distributed ? "; distributed optimizer: 6 + 12/dp" : "")};
}

Placement placement_of(int span, const ClusterSpec& cluster) {
    return span <= cluster.gpus_per_host ? Placement::intra_host : Placement::cross_host;
}

PlanMemory convention_memory(const PlanLayout& p, int pp_rank, const EnginePipeline* pipeline) {
    const EngineLayout& l = p.engine;
    const EngineRank rank = engine_rank(l, pp_rank, pipeline);
    const StateBytes bytes = state_bytes(p.states, l.zero);
    const ModelStateBytes states =
        model_state_bytes(p.states, static_cast<double>(rank.layout.total_numel()), l.zero, l.gradient_ranks());
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
                                     l.sp, l.cp};
    double layer_micro = l.model.layers;
    if (rank.part.active()) {
        layer_micro = 0;
        for (std::size_t c = 0; c < rank.part.chunks.size(); ++c)
            layer_micro += (rank.part.chunks[c].end - rank.part.chunks[c].first) * rank.part.slots[c];
    }
    // GPT's per-layer formula is the paper's table 2; Llama's is derived the same way from its
    // own items (theory/llama_activation_memory.hpp).
    // Under context parallelism (Llama) the paper's form with s' = s / cp
    // (theory/activation_memory.hpp).
    auto per_layer = [&](Recompute recompute) {
        if (l.model.kind == ModelKind::llama && l.cp == 1)
            return llama_paper_layer_activation_bytes(l.model, l.seq_len, l.microbatch_size, l.tp, l.sp, recompute);
        return LayerActivationBytes{paper_layer_activation_bytes(shape, recompute),
                                    paper_layer_activation_formula(l.tp > 1, l.sp, recompute, l.cp)};
    };
    const LayerActivationBytes layer = per_layer(l.recompute);
    m.activation_bytes_per_layer = layer.bytes;
    m.activations = layer_micro * layer.bytes;
    // Full recompute rebuilds one layer's activations at a time during backward.
    if (l.recompute == Recompute::full) m.activations += per_layer(Recompute::none).bytes;
    m.activation_formula = layer.formula + " x layers x micro-batches in flight";
    // parbench's schemes' working buffers in the convention's bytes: gradient bucket slots
    // (ZeRO-2/3) and parameter gather slots (ZeRO-3).
    if (l.zero >= 2 && l.gradient_ranks() > 1) {
        const FlatLayout flat(rank.layout,
                              l.zero == 3 ? one_unit_per_group(rank.layout) : group_units_by_bytes(rank.layout, l.bucket_bytes),
                              l.gradient_ranks());
        const double slot = static_cast<double>(flat.largest_segment_numel());
        m.buffers += (2 + (l.overlap ? 1 : 0)) * slot * bytes.grads;
        if (l.zero == 3) m.buffers += (1 + (l.prefetch ? 1 : 0)) * slot * bytes.params;
    }
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

StateConvention parse_states(const std::string& name) {
    if (name == "zero") return StateConvention::zero;
    if (name == "megatron") return StateConvention::megatron;
    if (name == "parbench") return StateConvention::parbench;
    throw UsageError("--states '" + name + "': use zero, megatron or parbench");
}

std::string states_name(StateConvention states) {
    switch (states) {
        case StateConvention::zero: return "zero";
        case StateConvention::megatron: return "megatron";
        case StateConvention::parbench: return "parbench";
    }
    return "?";
}

ModelStateBytes model_state_bytes(StateConvention states, double psi, int zero, int dp) {
    if (states == StateConvention::parbench)
        throw std::logic_error("model_state_bytes: parbench's states are counted per buffer (engine_rank_memory)");
    const StateBytes bytes = state_bytes(states, zero);
    const double d = dp;
    ModelStateBytes m;
    m.rule = bytes.rule;
    m.params = bytes.params * psi / (zero >= 3 ? d : 1.0);
    m.grads = bytes.grads * psi / (zero >= 2 ? d : 1.0);
    m.optimizer = bytes.optimizer * psi / (zero >= 1 ? d : 1.0);
    return m;
}

PlanMemory plan_memory(const PlanLayout& p, const EnginePipeline* shared) {
    std::optional<EnginePipeline> built;
    if (shared == nullptr && p.engine.pp > 1) shared = &built.emplace(*engine_pipeline(p.engine));
    if (p.states == StateConvention::parbench) return engine_memory(p, shared);
    PlanMemory peak = convention_memory(p, 0, shared);
    for (int r = 1; r < p.engine.pp; ++r) {
        PlanMemory m = convention_memory(p, r, shared);
        if (m.total > peak.total) peak = std::move(m);
    }
    return peak;
}

PlanPrediction predict_layout(const PlanLayout& p, const PlanContext& context, const EnginePipeline* shared) {
    const EngineLayout& l = p.engine;
    const ClusterSpec& cluster = context.cluster;
    PlanPrediction out;
    out.layout = p;
    std::optional<EnginePipeline> built;
    if (shared == nullptr && l.pp > 1) shared = &built.emplace(*engine_pipeline(l));
    const EnginePipeline* pipeline = shared;
    out.memory = plan_memory(p, shared);
    out.memory_capacity = cluster.device.memory_gib * 1024.0 * 1024.0 * 1024.0;
    out.fits = out.memory.total <= out.memory_capacity;

    const int world = l.dp * l.tp * l.pp * l.cp;
    // Activations cross the wire in fp32 in parbench's engine, in 16 bits under the others.
    const double wire = p.states == StateConvention::parbench ? 1.0 : 0.5;
    // Every pipeline rank's traffic, by the formula train checks its counters against
    // (theory/rank_traffic.hpp); the tp and dp lines are the most loaded rank's, the pp lines the
    // busiest sender's (a middle stage sends most; a receive is its peer's send).
    const ParameterLayout whole = model_parameter_layout(l.model, l.seq_len, TensorSplit{0, l.tp, l.sp, l.tp_style});
    for (int r = 0; r < l.pp; ++r) out.traffic_by_pp_rank.push_back(engine_rank_traffic(l, r, 0, &whole));
    int busiest = 0;
    double busiest_bytes = -1;
    for (int r = 0; r < l.pp; ++r) {
        double bytes = 0;
        const auto pp = out.traffic_by_pp_rank[static_cast<std::size_t>(r)].find("pp");
        if (pp != out.traffic_by_pp_rank[static_cast<std::size_t>(r)].end())
            for (const auto& [op, v] : pp->second)
                if (op != "recv") bytes += v.bytes;
        if (bytes > busiest_bytes) {
            busiest_bytes = bytes;
            busiest = r;
        }
    }
    const EngineRank rank = engine_rank(l, out.memory.pp_rank, shared);
    auto add_lines = [&](const std::string& dimension, int pp_rank, int group, Placement placement, double scale) {
        const auto& by_dimension = out.traffic_by_pp_rank.at(static_cast<std::size_t>(pp_rank));
        const auto found = by_dimension.find(dimension);
        if (found == by_dimension.end()) return;
        for (const auto& [op, volume] : found->second) {
            if (volume.calls <= 0) continue;
            CommLine line{dimension, op, volume.calls, volume.bytes * scale, group, placement, 0, ""};
            if (op == "recv") {
                line.source = "its time is the matching send's (one transfer)";
            } else {
                const std::string model_op = op == "send" ? "sendrecv" : op;
                line.time_ms = volume.calls * context.comm.time_us(model_op, line.bytes / volume.calls,
                                                                   op == "send" ? 2 : group, placement) / 1e3;
                line.source = context.comm.source(model_op, placement);
            }
            out.comm.push_back(line);
        }
    };
    add_lines("tp", out.memory.pp_rank, l.tp, placement_of(l.tp, cluster), wire);
    // Under context parallelism the gradients are averaged over dp x cp ranks (one group).
    add_lines("dp", out.memory.pp_rank, l.gradient_ranks(), placement_of(l.gradient_ranks() * l.tp, cluster),
              p.states == StateConvention::zero ? 0.5 : 1.0);
    add_lines("pp", busiest, 2, placement_of(world, cluster), wire);
    // The cp group's attention transfers (theory/context_parallel.hpp); a ring's receives are the
    // other end of its sends, so the sends alone carry the time.
    add_lines("cp", out.memory.pp_rank, l.cp, placement_of(l.cp * l.tp, cluster), wire);

    // Compute, bubble, optimizer.
    out.flops_per_step = model_flops_per_step(l.model, p.global_batch, l.seq_len);
    // Ranks that outnumber their host's cores compute at cores / ranks of the unshared rate.
    out.compute_share = compute_share(cluster, world);
    const double rank_tflops = context.rate.tflops_per_gpu * out.compute_share.share;
    out.compute_ms = out.flops_per_step / (world * rank_tflops * 1e12) * 1e3;
    if (l.pp > 1) {
        const ScheduleShape shape{l.pp, l.microbatches, l.virtual_stages};
        const Schedule& schedule = pipeline->schedule;
        out.bubble_formula = theoretical_bubble(l.schedule, shape);
        out.bubble_formula_text = bubble_formula(l.schedule);
        out.bubble_simulated = out.bubble_formula;
        if (context.pass_costs_given || context.simulate_balanced) {
            const PassCosts costs = context.pass_costs_given ? context.pass_costs : balanced_costs(schedule);
            const SimulationResult simulated = simulate_schedule(schedule, l.p2p, costs);
            if (simulated.completed) out.bubble_simulated = simulated.bubble();
        }
        out.bubble_ms = out.compute_ms * out.bubble_simulated / (1.0 - out.bubble_simulated);
    }
    if (!context.rate.includes_optimizer) {
        const double owned = static_cast<double>(rank.layout.total_numel()) / (l.zero >= 1 ? l.gradient_ranks() : 1);
        const double gbps = context.rate.optimizer_gbps ? *context.rate.optimizer_gbps : cluster.device.memory_bandwidth_gbps;
        out.optimizer_ms = owned * 28.0 / (gbps * 1e9 * out.compute_share.share) * 1e3;
    }

    // Exposed communication.
    out.exposed_tp_ms = sum_time_ms(out.comm, "tp");
    out.exposed_cp_ms = sum_time_ms(out.comm, "cp");
    const double backward_ms = out.compute_ms * 2.0 / 3.0;
    double reduce_ms = 0, gather_ms = 0, largest_reduce_ms = 0, largest_gather_ms = 0;
    for (const CommLine& line : out.comm) {
        if (line.dimension != "dp") continue;
        const double each = line.time_ms / line.calls;
        if (line.collective == "allgather") {
            gather_ms += line.time_ms;
            largest_gather_ms = std::max(largest_gather_ms, each);
        } else {
            reduce_ms += line.time_ms;
            largest_reduce_ms = std::max(largest_reduce_ms, each);
        }
    }
    if (l.overlap && l.gradient_ranks() > 1) reduce_ms = std::max(largest_reduce_ms, reduce_ms - backward_ms);
    if (l.zero == 3 && l.prefetch && l.gradient_ranks() > 1) gather_ms = std::max(largest_gather_ms, gather_ms - out.compute_ms);
    out.exposed_dp_ms = reduce_ms + gather_ms;
    for (const CommLine& line : out.comm) {
        if (line.dimension != "pp") continue;
        if (line.collective == "send" && l.p2p == P2pMode::nonblocking)
            out.exposed_pp_ms += std::min(line.calls, 2.0 * (l.pp - 1)) * line.time_ms / line.calls;
        else
            out.exposed_pp_ms += line.time_ms;
    }
    out.step_ms = out.compute_ms + out.bubble_ms + out.optimizer_ms + out.exposed_ms();
    const double tokens = static_cast<double>(p.global_batch) * (l.model.kind != ModelKind::mlp ? l.seq_len : 1);
    out.tokens_per_s = tokens / (out.step_ms / 1e3);
    const double peak = l.precision == Precision::bf16 ? cluster.device.peak_tflops_bf16 : cluster.device.peak_tflops_fp32;
    out.mfu = peak > 0 ? out.flops_per_step / (out.step_ms / 1e3 * world * peak * 1e12) : 0.0;
    return out;
}

std::string layout_label(const PlanLayout& p) {
    const EngineLayout& l = p.engine;
    std::ostringstream label;
    label << "dp" << l.dp << " tp" << l.tp << (l.sp ? "+sp" : "") << " pp" << l.pp;
    if (l.cp > 1) label << " cp" << l.cp << " " << context_style_name(l.cp_style) << (l.cp_balance == ContextBalance::none ? " unbalanced" : "");
    if (l.pp > 1) {
        label << " " << schedule_kind_name(l.schedule);
        if (l.virtual_stages > 1) label << " v" << l.virtual_stages;
    }
    label << " m" << l.microbatches << " z" << l.zero;
    if (l.overlap) label << " overlap";
    if (l.prefetch) label << " prefetch";
    return label.str();
}

nlohmann::json to_json(const PlanPrediction& p) {
    const EngineLayout& l = p.layout.engine;
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
    return {{"label", layout_label(p.layout)},
            {"layout",
             {{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"sp", l.sp}, {"cp", l.cp},
              {"cp_style", l.cp > 1 ? nlohmann::json(context_style_name(l.cp_style)) : nlohmann::json(nullptr)},
              {"cp_balance", l.cp > 1 ? nlohmann::json(context_balance_name(l.cp_balance)) : nlohmann::json(nullptr)},
              {"zero", l.zero},
              {"schedule", l.pp > 1 ? schedule_kind_name(l.schedule) : "none"}, {"virtual_stages", l.virtual_stages},
              {"microbatches", l.microbatches}, {"microbatch_size", l.microbatch_size},
              {"global_batch", p.layout.global_batch}, {"overlap", l.overlap}, {"prefetch", l.prefetch},
              {"bucket_mb", static_cast<double>(l.bucket_bytes) / (1024.0 * 1024.0)},
              {"precision", l.precision == Precision::bf16 ? "bf16" : "fp32"},
              {"recompute", recompute_name(l.recompute)}, {"p2p", p2p_mode_name(l.p2p)}}},
            {"memory_bytes",
             {{"states", states_name(p.layout.states)}, {"pp_rank", p.memory.pp_rank}, {"params", p.memory.params},
              {"grads", p.memory.grads}, {"optimizer", p.memory.optimizer}, {"activations", p.memory.activations},
              {"buffers", p.memory.buffers}, {"total", p.memory.total}, {"capacity", p.memory_capacity},
              {"fits", p.fits}, {"convention", p.memory.convention},
              {"activation_formula", p.memory.activation_formula},
              {"activation_bytes_per_layer", p.memory.activation_bytes_per_layer}, {"items", items}}},
            {"comm", comm},
            {"traffic_by_pp_rank", by_rank},
            {"bubble",
             {{"formula", p.bubble_formula}, {"formula_text", p.bubble_formula_text},
              {"simulated", p.bubble_simulated}}},
            {"time_ms",
             {{"compute", p.compute_ms}, {"bubble", p.bubble_ms}, {"optimizer", p.optimizer_ms},
              {"exposed_tp", p.exposed_tp_ms}, {"exposed_dp", p.exposed_dp_ms}, {"exposed_pp", p.exposed_pp_ms},
              {"exposed_cp", p.exposed_cp_ms},
              {"step", p.step_ms}}},
            {"compute_sharing",
             {{"ranks_per_host", p.compute_share.ranks_per_host},
              {"cores_per_host",
               p.compute_share.cores_per_host > 0 ? nlohmann::json(p.compute_share.cores_per_host) : nlohmann::json(nullptr)},
              {"share", p.compute_share.share},
              {"oversubscribed", p.compute_share.oversubscribed()},
              {"rule", "each rank computes (model FLOPs and optimizer) at cores/ranks of the unshared rate when a "
                       "host's ranks outnumber its cores (the scheduler time-slices them), else at the whole rate"}}},
            {"flops_per_step", p.flops_per_step},
            {"tokens_per_s", p.tokens_per_s},
            {"mfu", p.mfu}};
}

}  // namespace parbench

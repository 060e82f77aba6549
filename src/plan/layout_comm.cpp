#include "plan/layout_comm.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace parbench {

namespace {

Placement placement_of(int span, const ClusterSpec& cluster) {
    return span <= cluster.gpus_per_host ? Placement::intra_host : Placement::cross_host;
}

// The pipeline rank that sends the most pp bytes (a middle stage sends most; a receive is its
// peer's send).
int busiest_sender(const std::vector<std::map<std::string, TrafficByOp>>& traffic_by_pp_rank) {
    int busiest = 0;
    double busiest_bytes = -1;
    for (std::size_t r = 0; r < traffic_by_pp_rank.size(); ++r) {
        double bytes = 0;
        const auto pp = traffic_by_pp_rank[r].find("pp");
        if (pp != traffic_by_pp_rank[r].end())
            for (const auto& [op, v] : pp->second)
                if (op != "recv") bytes += v.bytes;
        if (bytes > busiest_bytes) {
            busiest_bytes = bytes;
            busiest = static_cast<int>(r);
        }
    }
    return busiest;
}

// A cross-host group with k members on each host drives k of the host's NICs (one per GPU),
// up to what NVLink carries between them: its bandwidth term is k times one NIC's.
double nics_used(const ClusterSpec& cluster, int members_per_host) {
    const double nvlink_ratio = cluster.device.intra_host.busbw_gbps / cluster.device.cross_host.busbw_gbps;
    return std::max(1.0, std::min(static_cast<double>(members_per_host), nvlink_ratio));
}

// A count of calls for a line's source (whole in every layout plan prices).
std::string format_calls(double calls) { return std::to_string(std::llround(calls)); }

// Prices one dimension's traffic (theory/rank_traffic.hpp) into comm lines on the cluster's links.
struct CommPricer {
    const PlanLayout& p;
    const PlanContext& context;
    const std::vector<std::map<std::string, TrafficByOp>>& traffic_by_pp_rank;
    // Hybrid sharding: the dp traffic of a layout whose dp is the shard group (the replicas'
    // all-reduce is added apart, add_hybrid_replicas).
    std::optional<std::map<std::string, TrafficByOp>> shard_traffic;
    // The host hides nothing (plan/host_overlap.hpp): the dp calls parbench's engine issues
    // non-blocking are priced as such (nonblocking_calls).
    bool hides_nothing = false;

    // `stride`: how many ranks apart the group's members are (its members per host set a ring's
    // network steps, CommModel::time_us); 0 for point-to-point lines.
    void add(std::vector<CommLine>& comm, const std::string& dimension, int pp_rank, int group, Placement placement,
             double scale, double nics = 1.0, int stride = 0) const {
        const ClusterSpec& cluster = context.cluster;
        const int members_per_host = stride > 0 ? std::clamp(cluster.gpus_per_host / stride, 1, group) : 0;
        const auto& by_dimension = dimension == "dp" && shard_traffic
                                       ? *shard_traffic
                                       : traffic_by_pp_rank.at(static_cast<std::size_t>(pp_rank));
        const auto found = by_dimension.find(dimension);
        if (found == by_dimension.end()) return;
        for (const auto& [op, volume] : found->second) {
            if (volume.calls <= 0) continue;
            // The dp gathers carry parameters, in the convention's parameter bytes.
            const bool parameters = op == "allgather" && dimension == "dp";
            CommLine line{dimension, op, volume.calls,
                          volume.bytes * (parameters ? state_rules(p.states).parameter_wire : scale), group, placement,
                          0, ""};
            if (op == "recv") {
                line.source = "its time is the matching send's (one transfer)";
            } else {
                // Gradients are averaged over their group (op avg): an --op avg sweep prices that
                // apart (plan/alpha_beta.hpp).
                const bool averaged = (dimension == "dp" || dimension == "edp") &&
                                      (op == "allreduce" || op == "reducescatter");
                const std::string model_op = op == "send" ? "sendrecv" : averaged ? averaged_collective(op) : op;
                const double share = placement == Placement::cross_host ? nics : 1.0;
                const auto call_us = [&](const std::string& name) {
                    return context.comm.time_us(name, line.bytes / volume.calls / share, op == "send" ? 2 : group,
                                                placement, op == "send" ? 0 : members_per_host);
                };
                const double nonblocking = hides_nothing && dimension == "dp" && p.states == StateConvention::parbench
                                               ? nonblocking_calls(p.engine, op, volume.calls)
                                               : 0.0;
                const std::string nonblocking_op = nonblocking_collective(model_op);
                line.time_ms = ((volume.calls - nonblocking) * call_us(model_op) + nonblocking * call_us(nonblocking_op)) / 1e3;
                line.source = context.comm.source(nonblocking > 0 ? nonblocking_op : model_op, placement);
                if (nonblocking > 0)
                    line.source += "; " + format_calls(nonblocking) + " of " + format_calls(volume.calls) +
                                   " calls non-blocking, nothing progressing them beside the compute";
            }
            comm.push_back(line);
        }
    }
};

// The group the dense gradients are reduced (and sharded) over: dp x cp ranks under context
// parallelism, the shard group under hybrid sharding; its ranks are tp apart (Megatron-LM's
// order: tp, cp, dp, pp).
struct DpGroup {
    int ranks;
    Placement placement;
    double nics;
};

DpGroup dp_group(const PlanLayout& p, const ClusterSpec& cluster) {
    const Layout& l = p.engine;
    const int sharded_over = p.shard_group > 0 ? p.shard_group : l.gradient_ranks();
    return {sharded_over, placement_of(sharded_over * l.tp, cluster),
            nics_used(cluster, std::min(sharded_over, std::max(1, cluster.gpus_per_host / l.tp)))};
}

void add_expert_lines(PlanPrediction& out, const PlanLayout& p, const PlanContext& context, const CommPricer& pricer,
                      const DpGroup& dp, const EngineRank& rank) {
    const Layout& l = p.engine;
    const ClusterSpec& cluster = context.cluster;
    // parbench's engine, in Megatron-core's expert order (train/mesh.hpp): the MoE layers'
    // exchanges over the ep group, ep consecutive members of the dp x cp group (tp apart), and the
    // routed experts' gradients over the expert-data-parallel group (members tp x ep apart).
    if (p.states == StateConvention::parbench && l.ep > 1) {
        pricer.add(out.comm, "ep", out.memory.pp_rank, l.ep, placement_of(l.ep * l.tp, cluster), 1.0, 1.0, l.tp);
        const int edp = expert_data_parallel_size(l.gradient_ranks(), l.ep);
        pricer.add(out.comm, "edp", out.memory.pp_rank, edp, placement_of(edp * l.ep * l.tp, cluster), 1.0,
                   nics_used(cluster, std::min(edp, std::max(1, cluster.gpus_per_host / (l.tp * l.ep)))), l.tp * l.ep);
    }
    if (p.experts.active()) {
        // MoE in Megatron-core's expert order (tp, ep, expert-dp, pp; cp folded into the expert
        // dp): the ep group's members are tp apart, the expert-dp group's tp x ep apart.
        const int ep = p.engine.ep, host = cluster.gpus_per_host;
        const MoeLinks links{placement_of(dp.ranks * l.tp, cluster), placement_of(dp.ranks * l.tp, cluster),
                             placement_of(ep * l.tp, cluster),
                             nics_used(cluster, std::min(dp.ranks, std::max(1, host / l.tp))),
                             nics_used(cluster, std::min(expert_data_parallel(p), std::max(1, host / (l.tp * ep))))};
        apply_moe_traffic(out, context, static_cast<double>(rank.layout.total_numel()), links);
    }
}

// FSDP without resharding after forward: one gather per layer and micro-batch, for the forward;
// the backward reuses it.
void keep_forward_gathers(std::vector<CommLine>& comm) {
    for (CommLine& line : comm)
        if (line.dimension == "dp" && line.collective == "allgather") {
            line.calls /= 2;
            line.bytes /= 2;
            line.time_ms /= 2;
            line.source += "; no reshard after forward: the forward's gathers only";
        }
}

// DeepSpeed's ZeRO-3 under full recompute: what the recompute forward's release lets go is
// gathered a third time for the backward (theory/traffic.hpp, deepspeed_recompute_regather,
// from DeepSpeed's coordinator and its default settings). Under --states zero, the ZeRO
// paper's own implementation; Megatron's convention and parbench's engine run ZeRO-3 in FSDP's
// form, whose recompute uses the backward's gather. Not with a pipeline (DeepSpeed's
// PipelineEngine refuses ZeRO-2/3: deepspeed/runtime/pipe/engine.py), FSDP's variants (no
// reshard, hybrid) or MoE models (their experts' submodules are not modelled). Returns the
// line's index in `comm`, if one is added.
std::optional<std::size_t> add_deepspeed_regather(std::vector<CommLine>& comm, const PlanLayout& p,
                                                  const PlanContext& context, const ParameterLayout& whole,
                                                  const DpGroup& dp) {
    const Layout& l = p.engine;
    if (!(state_rules(p.states).zero3_regathers_after_recompute && l.zero == 3 && l.recompute == Recompute::full &&
          l.pp == 1 && p.reshard_after_forward && p.shard_group == 0 && l.gradient_ranks() > 1 && l.model.has_sequence() &&
          !l.model.moe))
        return std::nullopt;
    const RecomputeRegather regather = deepspeed_recompute_regather(l.model, whole);
    if (regather.uses <= 0) return std::nullopt;
    // One call per submodule gathered again: at most DeepSpeed's, whose prefetch may
    // coalesce several into one all-gather.
    const double calls = regather.uses * l.microbatches;
    // fp16 parameters under ZeRO's convention (the dp lines' scale).
    const double bytes = regather.elements * l.microbatches * 2.0;
    const int members_per_host = std::clamp(context.cluster.gpus_per_host / l.tp, 1, dp.ranks);
    const double share = dp.placement == Placement::cross_host ? dp.nics : 1.0;
    CommLine line{"dp", "allgather", calls, bytes, dp.ranks, dp.placement, 0,
                  "DeepSpeed ZeRO-3: released after the recompute forward, gathered again for the backward; " +
                      context.comm.source("allgather", dp.placement)};
    line.time_ms = calls *
                   context.comm.time_us("allgather", bytes / calls / share, dp.ranks, dp.placement, members_per_host) /
                   1e3;
    comm.push_back(line);
    return comm.size() - 1;
}

// Hybrid sharding: the replicas (one per host) all-reduce their gradient shard once per step.
void add_hybrid_replicas(std::vector<CommLine>& comm, const PlanLayout& p, const PlanContext& context) {
    const Layout& l = p.engine;
    if (!(p.shard_group > 0 && l.gradient_ranks() > p.shard_group)) return;
    const int replicas = l.gradient_ranks() / p.shard_group;
    double shard_bytes = 0, units = 0;
    for (const CommLine& line : comm)
        if (line.dimension == "dp" && line.collective == "reducescatter") {
            shard_bytes += line.bytes / p.shard_group / l.microbatches;
            units += line.calls / l.microbatches;
        }
    if (units <= 0) return;
    CommLine line{"dp", "allreduce", units, shard_bytes, replicas, Placement::cross_host, 0,
                  "hybrid sharding: the gradient shard across " + std::to_string(replicas) + " replicas, " +
                      context.comm.source("allreduce", Placement::cross_host)};
    line.time_ms = units * context.comm.time_us("allreduce", shard_bytes / units, replicas, Placement::cross_host) / 1e3;
    comm.push_back(line);
}

// Megatron-LM's pipeline transfers across hosts with tp > 1 (scatter-gather, arXiv 2104.04473
// sec. 4.1): each tp rank sends 1/t of the activation over its own NIC, then the t ranks of the
// receiving stage all-gather it over NVLink. parbench's engine sends the whole tensor per rank.
// Under sequence parallelism each tp rank holds and sends its own s/t shard already (the
// traffic counts the shard), which the next stage's sequence-parallel region takes as it is: no
// scatter, no gather.
void scatter_gather_pp_sends(std::vector<CommLine>& comm, const PlanLayout& p, const PlanContext& context, int world) {
    const Layout& l = p.engine;
    const ClusterSpec& cluster = context.cluster;
    if (!(state_rules(p.states).pp_scatter_gather && l.tp > 1 && !l.sp &&
          placement_of(world, cluster) == Placement::cross_host))
        return;
    for (CommLine& line : comm) {
        if (line.dimension != "pp" || line.collective != "send" || line.calls <= 0) continue;
        const double each = line.bytes / line.calls;
        line.time_ms = line.calls *
                       (context.comm.time_us("sendrecv", each / l.tp, 2, Placement::cross_host) +
                        context.comm.time_us("allgather", each, l.tp, placement_of(l.tp, cluster))) / 1e3;
        line.source += "; scatter over tp " + std::to_string(l.tp) + ", all-gather inside the host";
    }
}

}  // namespace

double megatron_ddp_buckets(double parameters, int dp) {
    const double bucket_size = std::max(40e6, 1e6 * dp);
    return std::max(1.0, std::ceil(parameters / bucket_size));
}

double megatron_param_gather_exposed_ms(double gather_ms, double buckets, double first_forward_ms) {
    const double n = std::max(1.0, buckets);
    const double g = gather_ms / n, f = first_forward_ms / n;
    return g + (n - 1) * std::max(0.0, g - f);
}

// Every pipeline rank's traffic, by the formula train checks its counters against
// (theory/rank_traffic.hpp), priced into comm lines: the tp and dp lines are the most loaded
// rank's, the pp lines the busiest sender's. Returns DeepSpeed's re-gather line, if any.
std::optional<std::size_t> predict_comm(PlanPrediction& out, const PlanLayout& p, const PlanContext& context,
                                        const ParameterLayout& whole, const EngineRank& rank) {
    const Layout& l = p.engine;
    const ClusterSpec& cluster = context.cluster;
    const int world = l.dp * l.tp * l.pp * l.cp;
    const StateRules& rules = state_rules(p.states);
    const double wire = rules.activation_wire;
    for (int r = 0; r < l.pp; ++r) out.traffic_by_pp_rank.push_back(engine_rank_traffic(l, r, 0, &whole));
    const int busiest = busiest_sender(out.traffic_by_pp_rank);
    CommPricer pricer{p, context, out.traffic_by_pp_rank, std::nullopt,
                      host_overlap(cluster, compute_share(cluster, world)).hides_nothing};
    if (p.shard_group > 0) {
        Layout shard = l;
        shard.dp = p.shard_group;
        pricer.shard_traffic = engine_rank_traffic(shard, out.memory.pp_rank, 0, &whole);
    }
    pricer.add(out.comm, "tp", out.memory.pp_rank, l.tp, placement_of(l.tp, cluster), wire, 1.0, 1);
    const DpGroup dp = dp_group(p, cluster);
    pricer.add(out.comm, "dp", out.memory.pp_rank, dp.ranks, dp.placement,
               rules.gradient_wire, dp.nics, l.tp);
    add_expert_lines(out, p, context, pricer, dp, rank);
    if (l.zero == 3 && !p.reshard_after_forward) keep_forward_gathers(out.comm);
    const std::optional<std::size_t> regather_line = add_deepspeed_regather(out.comm, p, context, whole, dp);
    add_hybrid_replicas(out.comm, p, context);
    pricer.add(out.comm, "pp", busiest, 2, placement_of(world, cluster), wire);
    scatter_gather_pp_sends(out.comm, p, context, world);
    // The cp group's attention transfers (theory/context_parallel.hpp); a ring's receives are the
    // other end of its sends, so the sends alone carry the time.
    pricer.add(out.comm, "cp", out.memory.pp_rank, l.cp, placement_of(l.cp * l.tp, cluster), wire, 1.0, l.tp);
    return regather_line;
}

}  // namespace parbench

#include "plan/moe_plan.hpp"

#include <algorithm>
#include <numeric>

#include <stdexcept>

#include "plan/layout_plan.hpp"
#include "plan/stage_compute.hpp"
#include "theory/moe.hpp"
#include "theory/moe_a2a_overlap_1f1b.hpp"
#include "theory/moe_work.hpp"

namespace parbench {

std::vector<LayerRange> pipeline_rank_layers(const Layout& l, int pp_rank) {
    if (l.pp == 1 || l.stage_ranges.empty()) return {LayerRange{0, l.model.layers}};
    // Virtual stage i runs on rank i mod p (partition.hpp's order: chunk-major).
    std::vector<LayerRange> ranges;
    for (std::size_t i = 0; i < l.stage_ranges.size(); ++i)
        if (static_cast<int>(i % static_cast<std::size_t>(l.pp)) == pp_rank) ranges.push_back(l.stage_ranges[i]);
    return ranges;
}

int expert_data_parallel(const PlanLayout& p) { return std::max(1, p.engine.gradient_ranks() / p.engine.ep); }

MoeRankParameters moe_rank_parameters(const PlanLayout& p, double skeleton_parameters,
                                      const std::vector<LayerRange>& layers) {
    MoeRankParameters r;
    r.dense = skeleton_parameters;
    if (!p.experts.active()) return r;
    const ModelConfig& model = *p.experts.model;
    for (const LayerRange& range : layers) {
        r.layers += range.end - range.first;
        r.moe_layers += moe_layers_in(model, range.first, range.end);
    }
    const MoeLayerParameters layer = moe_layer_parameters(model);
    if (p.states == StateConvention::parbench) {
        // The engine's layout is the MoE model's own (theory/model_layout.hpp): router, shared and
        // routed experts whole on every tp rank, which runs the layer replicated (the routed ones
        // split over tp under --etp); an ep rank holds E/ep of the routed experts, as in
        // Megatron-core. The skeleton counted the engine's layout, so its routed experts are
        // already the rank's E/ep (/etp).
        r.routed = r.moe_layers * layer.routed / p.engine.ep / p.engine.etp;
        r.dense = skeleton_parameters - r.routed;
        return r;
    }
    const double t = p.engine.tp;
    // Megatron's split: attention, MLPs and shared experts by tp, routed experts by etp; the
    // router is replicated.
    r.dense += r.layers * layer.attention_delta / t +
               r.moe_layers * (layer.router + (layer.shared - layer.dense_mlp) / t);
    r.routed = r.moe_layers * layer.routed / p.engine.ep / p.engine.etp;
    return r;
}

void apply_moe_memory(PlanMemory& m, const PlanLayout& p, double skeleton_parameters, double layer_micro) {
    const Layout& l = p.engine;
    const MoeRankParameters r = moe_rank_parameters(p, skeleton_parameters, pipeline_rank_layers(l, m.pp_rank));
    const int edp = expert_data_parallel(p);
    const ModelStateBytes dense = model_state_bytes(p.states, r.dense, l.zero, l.gradient_ranks());
    const ModelStateBytes experts = model_state_bytes(p.states, r.routed, l.zero, edp);
    m.params = dense.params + experts.params;
    m.grads = dense.grads + experts.grads;
    m.optimizer = dense.optimizer + experts.optimizer;
    m.convention += "; MoE in Megatron-core's layout (ep carved from the dp x cp ranks): each rank holds E/ep of the "
                    "routed experts (/tp), their states sharded by ZeRO over the expert-data-parallel group of dp x cp "
                    "/ ep = " + std::to_string(edp) + " ranks; router, shared experts, attention and the rest are dense, "
                    "sharded over dp x cp = " + std::to_string(l.gradient_ranks());
    if (!p.experts.has_experts() || r.moe_layers == 0 || r.layers == 0) return;
    const ModelConfig& model = *p.experts.model;
    MoeActivationShape shape;
    shape.tokens = static_cast<double>(l.local_seq_len()) * l.microbatch_size;
    shape.hidden = model.hidden;
    shape.experts = model.moe->experts;
    shape.top_k = model.moe->top_k;
    shape.shared_experts = model.moe->shared_experts;
    shape.expert_hidden = model.moe->expert_hidden;
    shape.tp = l.tp;
    shape.imbalance = p.experts.effective_imbalance(p.engine.ep);
    // The skeleton counted the dense SwiGLU's gate, up and product, 6·T·f/t bytes, per layer.
    const double dense_mlp = 6.0 * shape.tokens * model.ffn_hidden / l.tp;
    const double extra_per_layer = moe_mlp_activation_bytes(shape) - dense_mlp;
    // Full recompute keeps each layer's input only, as dense; the one layer rebuilt at a time in
    // backward is an MoE layer at its largest.
    if (l.recompute == Recompute::full)
        m.activations += extra_per_layer;
    else
        m.activations += layer_micro * r.moe_layers / r.layers * extra_per_layer;
    m.activation_formula += "; MoE layers: the dense MLP's 6sbf/t replaced by " +
                            std::string(moe_mlp_activation_formula) + " (T = sb on the rank, ρ the imbalance; theory/moe.hpp)";
}

void apply_moe_traffic(PlanPrediction& out, const PlanContext& context, double skeleton_parameters,
                       const MoeLinks& links) {
    const PlanLayout& p = out.layout;
    const Layout& l = p.engine;
    if (!p.experts.active()) return;
    const ModelConfig& model = *p.experts.model;
    MoePrediction& moe = out.moe;
    moe.active = true;
    moe.ep = p.engine.ep;
    moe.etp = p.engine.etp;
    // Both conventions hold E/ep experts per rank and reduce their gradients over dp x cp / ep.
    moe.expert_dp = expert_data_parallel(p);
    moe.imbalance = p.experts.effective_imbalance(p.engine.ep);
    moe.ep_placement = links.ep;
    const MoeRankParameters r =
        moe_rank_parameters(p, skeleton_parameters, pipeline_rank_layers(l, out.memory.pp_rank));
    moe.dense_parameters_rank = r.dense;
    moe.expert_parameters_rank = r.routed;
    if (model.moe) {
        const MoeParameterCount count = moe_parameter_count(model);
        moe.total_parameters = static_cast<double>(count.total);
        moe.active_parameters = static_cast<double>(count.active);
    }

    // The skeleton's gradient traffic, split: dense parameters over dp x cp as before, routed
    // experts over their expert-data-parallel group (nothing to reduce when it is one rank).
    // parbench's engine formulas counted train's own split (its "dp" and "edp" lines): they
    // stand as they are.
    const double dense_share = skeleton_parameters > 0 ? r.dense / skeleton_parameters : 1.0;
    const double expert_share = skeleton_parameters > 0 && moe.expert_dp > 1 ? r.routed / skeleton_parameters : 0.0;
    for (CommLine& line : out.comm) {
        if (p.states == StateConvention::parbench) break;
        if (line.dimension != "dp" || line.calls <= 0) continue;
        const double each = line.bytes / line.calls;
        const auto share_of = [](Placement placement, double nics) { return placement == Placement::cross_host ? nics : 1.0; };
        const double dense_us = context.comm.time_us(line.collective, each * dense_share / share_of(links.dp, links.dp_nics),
                                                     line.group, links.dp);
        const double expert_us = expert_share > 0 ? context.comm.time_us(line.collective,
                                                                         each * expert_share / share_of(links.edp, links.edp_nics),
                                                                         moe.expert_dp, links.edp)
                                                  : 0.0;
        line.bytes = line.calls * each * (dense_share + expert_share);
        line.time_ms = line.calls * (dense_us + expert_us) / 1e3;
        line.source += "; dense parameters over dp x cp, routed experts over the expert-dp group of " +
                       std::to_string(moe.expert_dp) + " (" + placement_name(links.edp) + ")";
    }

    // The all-to-all of every MoE layer on the pipeline rank with the most of them.
    for (int rank = 0; rank < l.pp; ++rank) {
        int count = 0;
        for (const LayerRange& range : pipeline_rank_layers(l, rank)) count += moe_layers_in(model, range.first, range.end);
        moe.moe_layers_rank = std::max(moe.moe_layers_rank, count);
    }
    if (!model.moe || moe.ep == 1 || moe.moe_layers_rank == 0) return;
    if (p.states == StateConvention::parbench) {
        // The ep lines are the engine's (theory/traffic.hpp expert_parallel_traffic, added with the
        // other dimensions): the counts' alltoall and the dispatch and combine alltoallv as train
        // counts them, under balanced routing.
        for (const CommLine& line : out.comm) {
            if (line.dimension != "ep") continue;
            moe.alltoall_calls += line.calls;
            moe.alltoall_bytes += line.bytes;
            moe.alltoall_ms += line.time_ms;
        }
        out.exposed_ep_ms = moe.alltoall_ms;  // train waits for each exchange
        return;
    }
    // Each tp rank dispatches its sequence-parallel shard of the tokens (with tp > 1 Megatron-core
    // requires sp for MoE; the command refuses the rest).
    const double tokens = static_cast<double>(l.local_seq_len()) * l.microbatch_size / (l.sp ? l.tp : 1);
    const double element = l.precision == Precision::bf16 ? 2.0 : 4.0;
    const double calls = static_cast<double>(moe_alltoalls_per_layer) * moe.moe_layers_rank * l.microbatches;
    const double buffer = moe_alltoall_buffer_bytes(tokens, model.hidden, model.moe->top_k, element, moe.imbalance);
    CommLine line{"ep", "alltoall", calls,
                  calls * moe_alltoall_bytes(tokens, model.hidden, model.moe->top_k, moe.ep, element, moe.imbalance),
                  moe.ep, links.ep, 0, ""};
    line.time_ms = calls * context.comm.time_us("alltoall", buffer, moe.ep, links.ep) / 1e3;
    line.source = "dispatch + combine, forward + backward: 4 per MoE layer and micro-batch; bytes leaving the rank "
                  "(tokens x hidden x top_k x (ep-1)/ep x imbalance); the busiest receiver's buffer timed, " +
                  context.comm.source("alltoall", links.ep);
    moe.alltoall_calls = calls;
    moe.alltoall_bytes = line.bytes;
    moe.alltoall_ms = line.time_ms;
    // Megatron-core's dispatcher waits for each all-to-all: all of it is exposed.
    out.exposed_ep_ms = line.time_ms;
    out.comm.push_back(line);
}

std::vector<PlanLayout> with_expert_degrees(const std::vector<PlanLayout>& layouts) {
    std::vector<PlanLayout> out;
    for (const PlanLayout& layout : layouts) {
        if (!layout.experts.has_experts()) {
            out.push_back(layout);
            continue;
        }
        const bool engine = layout.states == StateConvention::parbench;
        // Megatron-core runs MoE under tensor parallelism only with sequence parallelism.
        if (!engine && (layout.shard_group > 0 || (layout.engine.tp > 1 && !layout.engine.sp))) continue;
        const int degrees = std::gcd(layout.experts.model->moe->experts, layout.engine.gradient_ranks());
        for (int ep = 1; ep <= degrees; ++ep) {
            if (degrees % ep != 0) continue;
            PlanLayout variant = layout;
            variant.engine.ep = ep;
            // Each convention's default experts' tensor parallelism (plan --etp's).
            variant.engine.etp = engine ? 1 : layout.engine.tp;
            out.push_back(variant);
        }
    }
    return out;
}

std::vector<PlanLayout> with_a2a_overlap_1f1b(const std::vector<PlanLayout>& layouts) {
    std::vector<PlanLayout> out;
    for (const PlanLayout& layout : layouts) {
        out.push_back(layout);
        const Layout& l = layout.engine;
        if (!layout.experts.has_experts() || layout.engine.moe.a2a_overlap || layout.engine.moe.a2a_overlap_1f1b) continue;
        // train's rule (plan --moe-a2a-overlap-1f1b's): only the layouts it takes.
        if (moe_a2a_overlap_1f1b_refusal(l) ||
            moe_a2a_overlap_1f1b_stage_refusal(*layout.experts.model, l.stage_ranges))
            continue;
        PlanLayout paired = layout;
        paired.engine.moe.a2a_overlap_1f1b = true;
        out.push_back(paired);
    }
    return out;
}

double moe_paired_group_exposed_ms(const ExchangeStretches& stretches, double exchange_ms) {
    const std::vector<double>& f = stretches.forward_ms;
    const std::vector<double>& b = stretches.backward_ms;
    if (f.empty() || f.size() != b.size() || f.size() % 2 == 0)
        throw std::logic_error("moe_paired_group_exposed_ms: 2n + 1 stretches each way expected");
    const std::size_t exchanges = f.size() - 1;  // per pass
    // One thread's clock; each fiber's exchange in flight completes at *_done.
    double now = 0, exposed = 0, forward_done = 0, backward_done = 0;
    const auto wait_until = [&](double done) {
        const double wait = std::max(0.0, done - now);
        exposed += wait;
        now += wait;
    };
    now += f[0];
    if (exchanges > 0) forward_done = now + exchange_ms;
    for (std::size_t k = 0; k < exchanges; ++k) {
        // B resumes (its previous exchange first), runs stretch k and posts.
        if (k > 0) wait_until(backward_done);
        now += b[k];
        backward_done = now + exchange_ms;
        // F resumes: its exchange k, then stretch k + 1 and its next post (none after the last).
        wait_until(forward_done);
        now += f[k + 1];
        if (k + 1 < exchanges) forward_done = now + exchange_ms;
    }
    // F has ended; B waits for its last exchange and runs to its end.
    if (exchanges > 0) wait_until(backward_done);
    return exposed;
}

double moe_rank_exposed_ms(int microbatches, int paired_groups, int moe_layers, double exchange_ms, double counts_ms,
                           double paired_group_ms) {
    const double m = microbatches, paired = paired_groups, n = moe_layers;
    // An unpaired forward and an unpaired backward: 2 exchanges per MoE layer each (moe_alltoalls_per_layer in all).
    return m * n * counts_ms + (m - paired) * moe_alltoalls_per_layer * n * exchange_ms + paired * paired_group_ms;
}

double apply_moe_a2a_overlap_1f1b(PlanPrediction& out, const std::vector<ExchangeStretches>& stretches,
                                  const std::vector<int>& paired_groups) {
    const PlanLayout& p = out.layout;
    const Layout& l = p.engine;
    MoePrediction& moe = out.moe;
    moe.a2a_overlap_1f1b = true;
    // One exchange's time from the ep lines (every dispatch and combine moves the same rows under
    // balanced routing): parbench's engine counts its dispatch/combine as alltoallv and the row
    // counts as alltoall; Megatron-core's one line is the dispatch/combine.
    for (const CommLine& line : out.comm) {
        if (line.dimension != "ep" || line.calls <= 0) continue;
        const bool counts = p.states == StateConvention::parbench && line.collective == "alltoall";
        (counts ? moe.counts_ms : moe.exchange_ms) = line.time_ms / line.calls;
    }
    double exposed = 0, hidden = 0;
    for (int r = 0; r < l.pp; ++r) {
        int moe_layers = 0;
        for (const LayerRange& range : pipeline_rank_layers(l, r))
            moe_layers += moe_layers_in(*p.experts.model, range.first, range.end);
        const int groups = paired_groups.at(static_cast<std::size_t>(r));
        const double group_ms =
            groups > 0 ? moe_paired_group_exposed_ms(stretches.at(static_cast<std::size_t>(r)), moe.exchange_ms) : 0.0;
        const double blocking = moe_rank_exposed_ms(l.microbatches, 0, moe_layers, moe.exchange_ms, moe.counts_ms, 0.0);
        const double paired =
            moe_rank_exposed_ms(l.microbatches, groups, moe_layers, moe.exchange_ms, moe.counts_ms, group_ms);
        moe.paired_groups_by_pp_rank.push_back(groups);
        moe.blocking_exposed_ms_by_pp_rank.push_back(blocking);
        moe.paired_exposed_ms_by_pp_rank.push_back(paired);
        if (r == 0 || paired > exposed) {
            exposed = paired;
            hidden = blocking - paired;
        }
    }
    out.exposed_ep_ms = exposed;
    return std::max(0.0, hidden);
}

double moe_overlapped_exposure(double blocking_ms, double overlappable_ms, double compute_ms) {
    const double half = overlappable_ms / 2.0;
    return blocking_ms + half + std::max(0.0, half - compute_ms);
}

std::string moe_approximations(const ModelConfig& config, bool a2a_overlap, bool a2a_overlap_1f1b) {
    std::string text = "routed experts' work as E/ep GEMMs of the busiest rank's tokens per expert; ";
    text += a2a_overlap ? "all-to-all under --moe-a2a-overlap: half of the dispatch/combine exposed, the other half "
                          "hidden up to the step's compute (an upper bound on what it overlaps)"
            : a2a_overlap_1f1b
                ? "all-to-all under --moe-a2a-overlap-1f1b: in 1F1B's paired steady-state steps each exchange hidden "
                  "by the partner pass's compute until its next switch, assuming a transport that progresses on its "
                  "own (NCCL, a NIC; Open MPI's shared memory progresses only inside MPI calls); warm-up, cool-down "
                  "and the last stage fully exposed"
                : "all-to-all fully exposed (no dispatch/compute overlap)";
    if (config.mla)
        text += "; multi-head latent attention counted exactly in parameters (states, optimizer, FLOPs of its "
                "projections), its compute, activations and attention core as " + std::to_string(config.heads) +
                " heads of width hidden/heads";
    text += "; no multi-token-prediction module (DeepSeek-V3's 14B MTP is outside its 671B)";
    return text;
}

nlohmann::json to_json(const MoePrediction& m) {
    return {{"ep", m.ep},
            {"etp", m.etp},
            {"expert_data_parallel", m.expert_dp},
            {"imbalance", m.imbalance},
            {"total_parameters", m.total_parameters},
            {"active_parameters", m.active_parameters},
            {"dense_parameters_per_rank", m.dense_parameters_rank},
            {"expert_parameters_per_rank", m.expert_parameters_rank},
            {"moe_layers_per_pp_rank", m.moe_layers_rank},
            {"alltoall", {{"calls", m.alltoall_calls}, {"bytes", m.alltoall_bytes}, {"time_ms", m.alltoall_ms},
                          {"placement", placement_name(m.ep_placement)}}},
            {"layout", "Megatron-core: ep carved from the dp x cp ranks (order tp, cp, ep, dp, pp)"},
            {"a2a_overlap_1f1b",
             m.a2a_overlap_1f1b ? nlohmann::json{{"exchange_ms", m.exchange_ms},
                                                 {"counts_ms", m.counts_ms},
                                                 {"paired_groups_by_pp_rank", m.paired_groups_by_pp_rank},
                                                 {"exposed_ms_by_pp_rank", m.paired_exposed_ms_by_pp_rank},
                                                 {"blocking_exposed_ms_by_pp_rank", m.blocking_exposed_ms_by_pp_rank},
                                                 {"model", "per paired (F, B) group each exchange exposed "
                                                           "max(0, its time - the partner's compute and wait since "
                                                           "its post); unpaired passes wait for all of it"}}
                                : nlohmann::json(nullptr)}};
}

}  // namespace parbench

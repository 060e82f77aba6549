#include "train/pipeline/pipeline_report.hpp"

#include <cstdio>
#include <numeric>
#include <string>

#include "report/chrome_trace.hpp"

namespace parbench {

void add_pipeline_results(nlohmann::json& result, const TrainPlan& plan, const MeshShape& mesh,
                          const PipelineMeasurements& pm, const std::vector<MemoryUsage>& memory_by_rank) {
    const ScheduleShape shape = plan.layout.schedule_shape();
    const double span = std::accumulate(pm.span_ms.begin(), pm.span_ms.end(), 0.0) /
                        static_cast<double>(std::max<std::size_t>(pm.span_ms.size(), 1));
    // Per rank: 1 - compute / span, with span the time from the step's start to the last
    // rank's last pipeline action, the same for every rank (as the formula's idle slots are).
    std::vector<double> stage_sum(static_cast<std::size_t>(mesh.pp), 0.0);
    std::vector<int> stage_ranks(static_cast<std::size_t>(mesh.pp), 0);
    nlohmann::json ranks = nlohmann::json::array();
    double overall = 0.0;
    for (std::size_t r = 0; r < pm.compute_ms.size(); ++r) {
        const double bubble = span > 0.0 ? 1.0 - pm.compute_ms[r] / span : 0.0;
        const auto stage = static_cast<std::size_t>(pm.stage_of_rank[r]);
        stage_sum[stage] += bubble;
        ++stage_ranks[stage];
        overall += bubble;
        ranks.push_back({{"rank", r},
                         {"stage", stage},
                         {"bubble", bubble},
                         {"compute_ms", pm.compute_ms[r]},
                         {"recv_wait_ms", pm.recv_wait_ms[r]},
                         {"send_ms", pm.send_ms[r]},
                         {"peer_wait_ms", pm.peer_wait_ms[r]},
                         {"p2p_bytes_sent", pm.p2p_bytes[r]}});
    }
    std::vector<double> per_stage;
    for (std::size_t s = 0; s < stage_sum.size(); ++s) per_stage.push_back(stage_sum[s] / std::max(stage_ranks[s], 1));
    overall /= static_cast<double>(std::max<std::size_t>(pm.compute_ms.size(), 1));

    result["layout"]["schedule"] = schedule_kind_name(plan.layout.schedule);
    result["bubble"] = {
        {"measured", overall},
        {"measured_per_stage", per_stage},
        {"theoretical", theoretical_bubble(plan.layout.schedule, shape)},
        {"formula", bubble_formula(plan.layout.schedule)},
        {"normalisation", "idle / step pipeline time: per rank 1 - (F+B+W compute time) / (time from the step's "
                          "start to the last rank's last pipeline action), mean over timed steps; measured_per_stage "
                          "is the mean over a stage's ranks, measured the mean over all ranks. The formula is the "
                          "same ratio for balanced stages and free transfers (Megatron's t_pb/t_id = (p-1)/m is "
                          "bubble over ideal time instead). Receive waits are idle time and include the transfer. "
                          "peer_wait_ms: the part of the rank's time blocked in pipeline-group calls spent before "
                          "the peer had issued its side of the transfer (waiting for a peer still computing): "
                          "bubble, and left out of comm.exposed_ms.pp; the rest of the wait is communication"},
        {"pipeline_ms", span},
        {"by_rank", ranks},
    };
    nlohmann::json stages = nlohmann::json::array();
    for (int s = 0; s < mesh.pp; ++s) {
        // The stage's ranks hold the same activations; take the largest.
        std::size_t activations = 0;
        for (std::size_t r = 0; r < memory_by_rank.size(); ++r)
            if (pm.stage_of_rank[r] == s)
                activations = std::max(activations, memory_by_rank[r].peak_of(MemoryCategory::activations));
        nlohmann::json layers = nlohmann::json::array();
        for (int c = 0; c < shape.virtual_stages; ++c) {
            const LayerRange& range = plan.layout.stage_ranges[static_cast<std::size_t>(c * mesh.pp + s)];
            layers.push_back({range.first, range.end});
        }
        const ActivationPool& pool = pm.kept_pools.at(static_cast<std::size_t>(s));
        stages.push_back({{"stage", s},
                          {"layers", layers},
                          {"microbatches_in_flight_peak", pm.in_flight[static_cast<std::size_t>(s)]},
                          {"kept_activation_pool",
                           {{"slots", pool.slots}, {"layer_stores", pool.layer_stores}, {"heads", pool.heads}}},
                          {"activations_peak_bytes", activations}});
    }
    result["pipeline"] = {
        {"schedule", schedule_kind_name(plan.layout.schedule)},
        {"stages", mesh.pp},
        {"microbatches", shape.microbatches},
        {"virtual_stages", shape.virtual_stages},
        {"p2p", p2p_mode_name(plan.layout.p2p)},
        {"split_backward", plan.layout.schedule == ScheduleKind::zero_bubble_h1},
        {"per_stage", stages},
        {"memory_method", "activations_peak_bytes: the ledger's peak of activation buffers on the stage's ranks: the "
                          "pool of kept activations its chunks share (kept_activation_pool: slots of boundary "
                          "tensors, layer stores per kind (dense, MoE), head buffers; each the schedule's peak held "
                          "at once over the chunks, enforced when taken), plus the micro-batches' inputs and the "
                          "shared backward scratch; microbatches_in_flight_peak: each chunk's own peak"},
    };
}

void print_pipeline_summary(std::ostream& out, const nlohmann::json& r) {
    if (!r.contains("bubble")) return;
    const auto& b = r["bubble"];
    const auto& p = r["pipeline"];
    char line[512];
    std::snprintf(line, sizeof line, "%-28s measured %.3f, theoretical %.3f = %s (%s, p=%d, m=%d, v=%d, %s p2p)\n",
                  "pipeline bubble", b["measured"].get<double>(), b["theoretical"].get<double>(),
                  b["formula"].get<std::string>().c_str(), p["schedule"].get<std::string>().c_str(),
                  p["stages"].get<int>(), p["microbatches"].get<int>(), p["virtual_stages"].get<int>(),
                  p["p2p"].get<std::string>().c_str());
    out << line;
    for (const auto& stage : p["per_stage"]) {
        const int s = stage["stage"].get<int>();
        std::snprintf(line, sizeof line, "  stage %-3d layers %-14s bubble %.3f, in flight %s, activations %.2f MiB\n",
                      s, stage["layers"].dump().c_str(), b["measured_per_stage"][static_cast<std::size_t>(s)].get<double>(),
                      stage["microbatches_in_flight_peak"].dump().c_str(),
                      stage["activations_peak_bytes"].get<double>() / (1024.0 * 1024.0));
        out << line;
    }
}

nlohmann::json pipeline_trace_json(const TrainPlan& plan, const MeshShape& mesh, const PipelineMeasurements& pm) {
    std::vector<TraceEvent> events;
    std::vector<std::string> names;
    for (std::size_t rank = 0; rank < pm.events.size(); ++rank) {
        const MeshCoordinates at = mesh_coordinates(mesh, static_cast<int>(rank));
        names.push_back("rank " + std::to_string(rank) + " (pp " + std::to_string(at.pp) + ", dp " +
                        std::to_string(at.dp) + ", tp " + std::to_string(at.tp) + ")");
        for (const TimelineEvent& e : pm.events[rank]) {
            TraceEvent t;
            t.name = timeline_kind_name(e.kind);
            if (e.microbatch >= 0) t.name += std::to_string(e.microbatch);
            t.category = timeline_kind_category(e.kind);
            t.pid = static_cast<int>(rank);
            t.ts_us = e.start_us;
            t.dur_us = e.duration_us;
            t.args = {{"step", e.step}};
            if (e.microbatch >= 0) t.args["microbatch"] = e.microbatch;
            if (e.stage >= 0) t.args["stage"] = e.stage;
            events.push_back(std::move(t));
        }
    }
    const nlohmann::json metadata = {{"tool", "parbench train"},
                                     {"schedule", schedule_kind_name(plan.layout.schedule)},
                                     {"pp", mesh.pp},
                                     {"dp", mesh.dp},
                                     {"tp", mesh.tp},
                                     {"microbatches", plan.layout.microbatches},
                                     {"virtual_stages", plan.layout.virtual_stages},
                                     {"p2p", p2p_mode_name(plan.layout.p2p)},
                                     {"theoretical_bubble", theoretical_bubble(plan.layout.schedule, plan.layout.schedule_shape())}};
    return chrome_trace_json(events, names, metadata);
}

}  // namespace parbench

#include "plan/host_contention.hpp"

#include <algorithm>
#include <stdexcept>

#include "theory/pipeline/schedule_simulation.hpp"

namespace parbench {

double busy_slowdown(double busy_step_scale, double alone_step_scale) {
    return std::max(1.0, busy_step_scale / alone_step_scale);
}

double HostContention::at(double busy_cores) const {
    if (!calibrated() || busy_cores <= 1.0) return 1.0;
    const double measured = std::min(busy_cores, static_cast<double>(busy_ranks));
    return 1.0 + (factor - 1.0) * (measured - 1.0) / (busy_ranks - 1.0);
}

namespace {

bool computing(const std::vector<std::pair<double, double>>& intervals, double t) {
    const auto after = std::upper_bound(intervals.begin(), intervals.end(), t,
                                        [](double x, const std::pair<double, double>& i) { return x < i.first; });
    return after != intervals.begin() && t < std::prev(after)->second;
}

// Each pipeline rank's time-weighted slowdown over its passes: the timeline cut at every pass's
// start and end, each piece at the level of the cores computing then (`per_stage` ranks per
// computing stage of the rank's host group, at most `cores`).
std::vector<double> pipeline_slowdowns(const SimulationResult& timeline, int group, double per_stage, int cores,
                                       const HostContention& contention) {
    const auto& intervals = timeline.compute_intervals;
    const int p = static_cast<int>(intervals.size());
    std::vector<double> slowdown(static_cast<std::size_t>(p), 1.0);
    for (int first = 0; first < p; first += group) {
        const int last = std::min(p, first + group);
        std::vector<double> cuts;
        for (int r = first; r < last; ++r)
            for (const auto& [start, end] : intervals[static_cast<std::size_t>(r)]) {
                cuts.push_back(start);
                cuts.push_back(end);
            }
        std::sort(cuts.begin(), cuts.end());
        std::vector<double> weighted(static_cast<std::size_t>(p), 0.0), busy(static_cast<std::size_t>(p), 0.0);
        for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
            const double length = cuts[i + 1] - cuts[i];
            if (!(length > 0)) continue;
            const double middle = 0.5 * (cuts[i] + cuts[i + 1]);
            int stages = 0;
            for (int r = first; r < last; ++r) stages += computing(intervals[static_cast<std::size_t>(r)], middle);
            const double level = contention.at(std::min(static_cast<double>(cores), stages * per_stage));
            for (int r = first; r < last; ++r)
                if (computing(intervals[static_cast<std::size_t>(r)], middle)) {
                    weighted[static_cast<std::size_t>(r)] += length * level;
                    busy[static_cast<std::size_t>(r)] += length;
                }
        }
        for (int r = first; r < last; ++r)
            if (busy[static_cast<std::size_t>(r)] > 0)
                slowdown[static_cast<std::size_t>(r)] = weighted[static_cast<std::size_t>(r)] / busy[static_cast<std::size_t>(r)];
    }
    return slowdown;
}

void scale(StageCompute& stage, double slowdown) {
    stage.forward_ms *= slowdown;
    stage.input_grad_ms *= slowdown;
    stage.weight_grad_ms *= slowdown;
    stage.recompute_ms *= slowdown;
    for (TpOverlapGemm& gemm : stage.tp_overlap_gemms) gemm.gemm_ms *= slowdown;
}

}  // namespace

std::vector<double> apply_host_contention(std::vector<StageCompute>& stages, const Layout& l, const Schedule* schedule,
                                          const HostContention& contention, const ComputeShare& share) {
    if (!contention.calibrated() || share.cores_per_host <= 0 || stages.empty()) return {};
    const int cores = share.cores_per_host;
    if (l.pp <= 1 || schedule == nullptr) {
        // Every rank of the host computes in step with the others.
        const std::vector<double> slowdown(stages.size(), contention.at(std::min(share.ranks_per_host, cores)));
        for (std::size_t r = 0; r < stages.size(); ++r) scale(stages[r], slowdown[r]);
        return slowdown;
    }
    if (stages.size() != static_cast<std::size_t>(l.pp))
        throw std::logic_error("apply_host_contention: one StageCompute per pipeline rank");
    const SimulationResult timeline = simulate_schedule(
        *schedule, l.p2p, pipeline_pass_costs(stages, l.virtual_stages, schedule->split_backward));
    if (!timeline.completed) return {};  // predict_bubble reports the schedule's problem
    // A host holds whole pipelines (each stage with ranks_per_host / pp peers computing in step),
    // or ranks_per_host consecutive stages of one.
    const int group = std::min(l.pp, share.ranks_per_host);
    const double per_stage = std::max(1.0, static_cast<double>(share.ranks_per_host) / l.pp);
    const std::vector<double> slowdown = pipeline_slowdowns(timeline, group, per_stage, cores, contention);
    for (std::size_t r = 0; r < stages.size(); ++r) scale(stages[r], slowdown[r]);
    return slowdown;
}

nlohmann::json to_json(const HostContention& contention) {
    if (!contention.calibrated()) return nullptr;
    return {{"busy_ranks", contention.busy_ranks},
            {"factor", contention.factor},
            {"source", contention.source},
            {"rule", "a rank computes factor x slower while busy_ranks cores of its CPU host compute (layouts in step: "
                     "always, with as many ranks as cores; pipeline ranks: weighted over the schedule's timeline by "
                     "how many stages compute at each instant)"}};
}

}  // namespace parbench

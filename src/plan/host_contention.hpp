// How much slower a rank computes on a CPU host while the host's other cores compute too. Two
// ranks on two cores share the L3, the memory bandwidth and the package's turbo budget, so a
// rank's GEMMs run slower than the same rank alone: on the 2-core development VM every 2-rank
// layout measured 99-115 ms of compute where a one-rank run (the other core idle) priced 95-106 ms
// (results/2026-12-05-validate-plan-quiet). The level is measured, not fitted: one-rank train runs
// started together, one per core (plan --calibrate-compute-busy), against the one-rank run alone
// (--calibrate-compute); their ratio is the slowdown with every core busy.
//
// A layout whose ranks compute in step (data and tensor parallel) runs at that slowdown all the
// time its host has as many ranks as cores. A pipeline does not: while one stage waits in the
// bubble its core idles, and the stage still computing runs at the alone rate. Each pipeline
// rank's slowdown is therefore read off the schedule's own timeline (the simulation at the
// alone costs, theory/pipeline/schedule_simulation.hpp): the time-weighted slowdown over its
// passes, each instant at the level of how many of the host's cores compute then. First order:
// the timeline is the alone one, not re-simulated at the slower costs.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "plan/cluster.hpp"
#include "plan/stage_compute.hpp"
#include "theory/layout.hpp"
#include "theory/pipeline/schedule.hpp"

namespace parbench {

struct HostContention {
    int busy_ranks = 0;   // one-rank runs that computed at once in the calibration; 0: none given
    double factor = 1.0;  // their compute over the same run's alone (measured_step_scale of each)
    std::string source;
    bool calibrated() const { return busy_ranks >= 2; }
    // The slowdown while `busy_cores` of the host's cores compute: 1 for one, `factor` at
    // busy_ranks and beyond (nothing measured above it), linear between the two measured points.
    double at(double busy_cores) const;
};

// The busy runs' level over the alone run's as the slowdown. Ranks computing at once share the
// caches, memory bandwidth and turbo budget, none of which speeds a rank up, so a busy level
// measured below the alone one is the runs' noise (their steps spread 2-3 % on the 2-core VM)
// and counts as no slowdown.
double busy_slowdown(double busy_step_scale, double alone_step_scale);

// Scales each stage's compute (its passes and linear GEMMs) by its rank's slowdown on `share`'s
// host: nothing unless `contention` is calibrated and the host is a CPU host (cores known).
// `schedule`: the layout's pipeline schedule when pp > 1 (a host holding whole pipelines, each
// pipeline rank's dp/tp/cp peers computing in step with it, or consecutive stages of one).
// Returns the slowdown applied per stage; empty when none was.
std::vector<double> apply_host_contention(std::vector<StageCompute>& stages, const Layout& layout, const Schedule* schedule,
                           const HostContention& contention, const ComputeShare& share);

nlohmann::json to_json(const HostContention& contention);

}  // namespace parbench

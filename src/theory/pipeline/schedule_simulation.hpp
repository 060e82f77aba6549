// Runs the ranks' action lists of a schedule against each other without MPI, the way the
// executor will: as a check (every receive meets the matching send, in order, and nothing
// deadlocks) and as a clock (with pass costs, how long the step takes and how idle each
// rank is, for comparing a schedule with its bubble formula).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "theory/pipeline/schedule.hpp"

namespace parbench {

// nonblocking: isend/irecv, a send never waits. blocking: send and recv wait for each other
// (a large MPI_Send is a rendezvous), so a send is issued together with the rank's next
// receive as one sendrecv (pulled ahead of the computes in between, which cannot need it),
// as Megatron-LM's send_forward_recv_backward does; else 1F1B's steady state deadlocks.
enum class P2pMode { nonblocking, blocking };
P2pMode parse_p2p_mode(const std::string& name);  // UsageError naming --p2p
std::string p2p_mode_name(P2pMode mode);
// UsageError for blocking transfers under the interleaved schedule: its cool-down has every
// rank send a gradient round the ring with no receive to pair it with, which rendezvous
// sends deadlock on (Megatron-LM batches all of its transfers for that reason).
void validate_p2p_mode(ScheduleKind kind, P2pMode mode);

// One call of the executor: a compute action, or a transfer made of a send, a receive or
// both at once (blocking mode's sendrecv).
struct Step {
    std::optional<Action> compute;
    std::optional<Action> send;
    std::optional<Action> recv;
};
std::vector<Step> rank_steps(const std::vector<Action>& actions, P2pMode mode);
// Every rank's actions in the order the executor issues them in `mode` (blocking mode pulls
// a receive ahead to pair it with a send).
std::vector<std::vector<Action>> issue_order(const Schedule& schedule, P2pMode mode);
// peak_in_flight and chunk_occupancy in that order.
std::vector<std::vector<int>> peak_in_flight(const Schedule& schedule, P2pMode mode);
std::vector<ChunkOccupancy> chunk_occupancy(const Schedule& schedule, P2pMode mode);

// Compute time of one pass of one micro-batch on one chunk; transfers are free.
struct PassCosts {
    double forward = 1.0;
    double backward = 2.0;  // B: with W inside when the schedule does not split the backward
    double weight = 1.0;    // W (split schedules)
};
// The costs under which a schedule's bubble formula holds: B = 2F unsplit, F = B = W split.
PassCosts balanced_costs(const Schedule& schedule);

struct SimulationResult {
    bool completed = false;
    std::string problem;        // why not: the deadlock or the mismatched message
    double makespan = 0.0;      // the step, in pass-cost units
    std::vector<double> busy;   // per rank, compute time
    // Per rank, each compute pass's [start, end) in issue order: when ranks computed at once
    // (plan/host_contention.hpp prices a CPU host's cores shared by the ranks computing together).
    std::vector<std::vector<std::pair<double, double>>> compute_intervals;
    double bubble() const;      // 1 - sum(busy) / (ranks x makespan)
};

SimulationResult simulate_schedule(const Schedule& schedule, P2pMode mode, const PassCosts& costs);
// Each pipeline rank at its own costs (stages of unequal work: the embedding on the first, the
// head on the last, uneven layers); one entry per rank.
SimulationResult simulate_schedule(const Schedule& schedule, P2pMode mode, const std::vector<PassCosts>& costs_by_rank);

}  // namespace parbench

#include "theory/pipeline/schedule_simulation.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <numeric>

#include "core/error.hpp"

namespace parbench {
namespace {

// A message as both sides name it: its kind and micro-batch, and the virtual stage it
// leaves from (the sender's) so that chunks of interleaved schedules are told apart.
struct Message {
    bool activation = true;
    int microbatch = 0;
    int from_stage = 0;
    double sent_at = 0.0;
    bool same(const Message& other) const {
        return activation == other.activation && microbatch == other.microbatch && from_stage == other.from_stage;
    }
};

struct Simulator {
    const Schedule& schedule;
    P2pMode mode;
    std::vector<PassCosts> costs;  // per rank
    int p;
    std::vector<std::vector<Step>> steps;
    std::vector<std::size_t> pc;
    std::vector<double> clock;
    std::vector<double> busy;
    std::vector<std::vector<std::pair<double, double>>> intervals;
    std::vector<std::vector<std::deque<Message>>> queues;  // [from][to], non-blocking sends in flight
    std::vector<bool> send_done, recv_done;                // parts of the current transfer step
    std::string problem;

    Simulator(const Schedule& s, P2pMode m, std::vector<PassCosts> c)
        : schedule(s), mode(m), costs(std::move(c)), p(s.shape.stages), pc(static_cast<std::size_t>(p), 0),
          clock(static_cast<std::size_t>(p), 0.0), busy(static_cast<std::size_t>(p), 0.0),
          intervals(static_cast<std::size_t>(p)),
          queues(static_cast<std::size_t>(p), std::vector<std::deque<Message>>(static_cast<std::size_t>(p))),
          send_done(static_cast<std::size_t>(p), false), recv_done(static_cast<std::size_t>(p), false) {
        for (const auto& actions : s.ranks) steps.push_back(rank_steps(actions, mode));
    }

    bool finished(int rank) const { return pc[idx(rank)] >= steps[idx(rank)].size(); }
    const Step& current(int rank) const { return steps[idx(rank)][pc[idx(rank)]]; }
    static std::size_t idx(int rank) { return static_cast<std::size_t>(rank); }

    Message message_of(int rank, const Action& send) const {
        return Message{send.kind == ActionKind::send_activation, send.microbatch, send.chunk * p + rank, 0.0};
    }
    // What a receive expects: the neighbouring virtual stage's message.
    Message expected_by(int rank, const Action& recv) const {
        const int stage = recv.chunk * p + rank;
        const bool activation = recv.kind == ActionKind::recv_activation;
        return Message{activation, recv.microbatch, activation ? stage - 1 : stage + 1, 0.0};
    }

    std::string describe(int rank, const Action& action) const {
        return "rank " + std::to_string(rank) + " " + action_label(action, schedule.shape.virtual_stages) + " (peer " +
               std::to_string(action.peer) + ")";
    }

    double cost(int rank, const Action& action) const {
        const PassCosts& c = costs[idx(rank)];
        if (action.kind == ActionKind::forward) return c.forward;
        if (action.kind == ActionKind::backward) return c.backward;
        return c.weight;
    }

    void advance(int rank) {
        ++pc[idx(rank)];
        send_done[idx(rank)] = false;
        recv_done[idx(rank)] = false;
    }

    // The receive of `rank`'s current step that has not completed yet, if any.
    const Action* pending_recv(int rank) const {
        if (finished(rank) || recv_done[idx(rank)] || !current(rank).recv) return nullptr;
        return &*current(rank).recv;
    }

    // A send completes at once (non-blocking: it is queued) or when the peer's current step
    // holds the matching receive (blocking: a rendezvous). Returns whether it made progress.
    bool try_send(int rank, const Action& send) {
        if (mode == P2pMode::nonblocking) {
            Message message = message_of(rank, send);
            message.sent_at = clock[idx(rank)];
            queues[idx(rank)][idx(send.peer)].push_back(message);
            send_done[idx(rank)] = true;
            return true;
        }
        const Action* recv = pending_recv(send.peer);
        if (recv == nullptr || recv->peer != rank) return false;
        if (!expected_by(send.peer, *recv).same(message_of(rank, send))) {
            problem = describe(rank, send) + " meets " + describe(send.peer, *recv) + ": different messages";
            return false;
        }
        const double at = std::max(clock[idx(rank)], clock[idx(send.peer)]);
        clock[idx(rank)] = clock[idx(send.peer)] = at;
        send_done[idx(rank)] = true;
        recv_done[idx(send.peer)] = true;
        return true;
    }

    bool try_queued_recv(int rank, const Action& recv) {
        auto& queue = queues[idx(recv.peer)][idx(rank)];
        if (queue.empty()) return false;
        if (!queue.front().same(expected_by(rank, recv))) {
            problem = describe(rank, recv) + " would receive another message first: the peer's sends and this "
                      "rank's receives are in different orders";
            return false;
        }
        clock[idx(rank)] = std::max(clock[idx(rank)], queue.front().sent_at);
        queue.pop_front();
        recv_done[idx(rank)] = true;
        return true;
    }

    bool step(int rank) {
        const Step& s = current(rank);
        if (s.compute) {
            intervals[idx(rank)].emplace_back(clock[idx(rank)], clock[idx(rank)] + cost(rank, *s.compute));
            clock[idx(rank)] += cost(rank, *s.compute);
            busy[idx(rank)] += cost(rank, *s.compute);
            advance(rank);
            return true;
        }
        bool progressed = false;
        if (s.send && !send_done[idx(rank)]) progressed = try_send(rank, *s.send) || progressed;
        if (s.recv && !recv_done[idx(rank)] && mode == P2pMode::nonblocking)
            progressed = try_queued_recv(rank, *s.recv) || progressed;
        if ((!s.send || send_done[idx(rank)]) && (!s.recv || recv_done[idx(rank)])) {
            advance(rank);
            return true;
        }
        return progressed;
    }

    SimulationResult run() {
        SimulationResult result;
        for (;;) {
            bool progressed = false;
            bool all_done = true;
            for (int rank = 0; rank < p; ++rank) {
                while (!finished(rank) && step(rank)) progressed = true;
                if (!problem.empty()) {
                    result.problem = problem;
                    return result;
                }
                all_done = all_done && finished(rank);
            }
            if (all_done) break;
            if (!progressed) {
                result.problem = "deadlock:";
                for (int rank = 0; rank < p; ++rank) {
                    if (finished(rank)) continue;
                    const Step& s = current(rank);
                    const Action& waiting = s.send && !send_done[idx(rank)] ? *s.send : *s.recv;
                    result.problem += " " + describe(rank, waiting) + " waits;";
                }
                return result;
            }
        }
        for (int from = 0; from < p; ++from)
            for (int to = 0; to < p; ++to)
                if (!queues[idx(from)][idx(to)].empty()) {
                    result.problem = "rank " + std::to_string(from) + " sent to rank " + std::to_string(to) +
                                     " a message that was never received";
                    return result;
                }
        result.completed = true;
        result.makespan = *std::max_element(clock.begin(), clock.end());
        result.busy = busy;
        result.compute_intervals = intervals;
        return result;
    }
};

}  // namespace

P2pMode parse_p2p_mode(const std::string& name) {
    if (name == "nonblocking") return P2pMode::nonblocking;
    if (name == "blocking") return P2pMode::blocking;
    throw UsageError("--p2p '" + name + "': use nonblocking (isend/irecv) or blocking (send/recv)");
}

std::string p2p_mode_name(P2pMode mode) { return mode == P2pMode::blocking ? "blocking" : "nonblocking"; }

void validate_p2p_mode(ScheduleKind kind, P2pMode mode) {
    if (kind == ScheduleKind::interleaved && mode == P2pMode::blocking)
        throw UsageError("--p2p blocking deadlocks --schedule interleaved (ring-wise sends in its cool-down); use "
                         "--p2p nonblocking or another schedule");
}

std::vector<Step> rank_steps(const std::vector<Action>& actions, P2pMode mode) {
    std::vector<Step> steps;
    steps.reserve(actions.size());
    std::vector<bool> taken(actions.size(), false);
    for (std::size_t i = 0; i < actions.size(); ++i) {
        if (taken[i]) continue;
        const Action& action = actions[i];
        Step step;
        if (action.is_compute())
            step.compute = action;
        else if (action.is_recv())
            step.recv = action;
        else {
            step.send = action;
            if (mode == P2pMode::blocking) {
                // The next receive, unless another send comes first (its order must hold).
                for (std::size_t j = i + 1; j < actions.size() && !actions[j].is_send(); ++j) {
                    if (!actions[j].is_recv()) continue;
                    step.recv = actions[j];
                    taken[j] = true;
                    break;
                }
            }
        }
        steps.push_back(step);
    }
    return steps;
}

std::vector<std::vector<Action>> issue_order(const Schedule& schedule, P2pMode mode) {
    std::vector<std::vector<Action>> order;
    for (const auto& actions : schedule.ranks) {
        std::vector<Action> issued;
        for (const Step& step : rank_steps(actions, mode))
            for (const auto* part : {&step.recv, &step.compute, &step.send})
                if (*part) issued.push_back(**part);
        order.push_back(std::move(issued));
    }
    return order;
}

std::vector<std::vector<int>> peak_in_flight(const Schedule& schedule, P2pMode mode) {
    return peak_in_flight(chunk_occupancy(schedule, mode), schedule.shape.virtual_stages);
}

std::vector<ChunkOccupancy> chunk_occupancy(const Schedule& schedule, P2pMode mode) {
    // Non-blocking transfers issue every action as a step of its own, in the schedule's order.
    if (mode == P2pMode::nonblocking) return chunk_occupancy(schedule, schedule.ranks);
    return chunk_occupancy(schedule, issue_order(schedule, mode));
}

PassCosts balanced_costs(const Schedule& schedule) {
    if (schedule.split_backward) return PassCosts{1.0, 1.0, 1.0};
    return PassCosts{1.0, 2.0, 0.0};
}

double SimulationResult::bubble() const {
    if (busy.empty() || makespan <= 0.0) return 0.0;
    const double total = std::accumulate(busy.begin(), busy.end(), 0.0);
    return 1.0 - total / (static_cast<double>(busy.size()) * makespan);
}

SimulationResult simulate_schedule(const Schedule& schedule, P2pMode mode, const PassCosts& costs) {
    return Simulator(schedule, mode, std::vector<PassCosts>(static_cast<std::size_t>(schedule.shape.stages), costs)).run();
}

SimulationResult simulate_schedule(const Schedule& schedule, P2pMode mode, const std::vector<PassCosts>& costs_by_rank) {
    if (costs_by_rank.size() != static_cast<std::size_t>(schedule.shape.stages))
        throw std::logic_error("simulate_schedule: one PassCosts per pipeline rank");
    return Simulator(schedule, mode, costs_by_rank).run();
}

}  // namespace parbench

// A pipeline schedule as data: for every pipeline rank, the list of actions it runs in one
// training step, in order. Compute actions are F (forward), B (backward; the input gradient
// only when the schedule splits the backward) and W (the weight gradient, zero-bubble
// schedules only) of one micro-batch on one chunk (virtual stage) of the rank; transfer
// actions send or receive one activation or one gradient to or from a neighbouring rank.
// One executor (pipeline_executor.hpp) runs any schedule; the same lists are printed by
// --print-schedule and checked by simulation (schedule_simulation.hpp) without MPI.
//
// Virtual stage s of p ranks with v chunks each lives on rank s % p as its chunk s / p
// (Megatron-LM's interleaving, arXiv 2104.04473 sec. 2.2: rank r holds stages r, r+p, ...).
// With v = 1, chunk 0 of rank r is stage r.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace parbench {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zero_bubble_h1 };

// "gpipe", "1f1b", "interleaved", "zb-h1"; UsageError naming --schedule otherwise.
ScheduleKind parse_schedule_kind(const std::string& name);
std::string schedule_kind_name(ScheduleKind kind);

enum class ActionKind { forward, backward, weight, send_activation, recv_activation, send_gradient, recv_gradient };

struct Action {
    ActionKind kind = ActionKind::forward;
    int microbatch = 0;
    int chunk = 0;  // this rank's chunk (virtual stage = chunk * p + rank)
    int peer = -1;  // pipeline rank of a transfer's other side
    bool is_compute() const {
        return kind == ActionKind::forward || kind == ActionKind::backward || kind == ActionKind::weight;
    }
    bool is_send() const { return kind == ActionKind::send_activation || kind == ActionKind::send_gradient; }
    bool is_recv() const { return kind == ActionKind::recv_activation || kind == ActionKind::recv_gradient; }
    bool operator==(const Action&) const = default;
};

struct ScheduleShape {
    int stages = 1;          // p: pipeline ranks
    int microbatches = 1;    // m: per step, on every pipeline rank
    int virtual_stages = 1;  // v: chunks per rank (interleaved only)
};

struct Schedule {
    ScheduleKind kind = ScheduleKind::one_f_one_b;
    ScheduleShape shape;
    bool split_backward = false;          // B is the input gradient only and W follows it
    std::vector<std::vector<Action>> ranks;  // per pipeline rank, in order, transfers included
};

// The smallest micro-batch count the schedule accepts for `stages` ranks (1 when any will do).
int minimum_microbatches(ScheduleKind kind, int stages);
// Throws UsageError naming --microbatches, --virtual-stages or --schedule when the shape
// does not suit the schedule (e.g. interleaved needs m a multiple of p).
void validate_schedule_shape(ScheduleKind kind, const ScheduleShape& shape);

Schedule make_schedule(ScheduleKind kind, const ScheduleShape& shape);

// The idle fraction of a step of the schedule on balanced stages with free transfers:
// bubble time / (bubble time + compute time), the same normalisation as the measured one.
// GPipe and 1F1B (p-1)/(m+p-1); interleaved (p-1)/(v·m+p-1) (arXiv 2104.04473 sec. 2.2,
// whose t_pb / t_id = (p-1)/(v·m) is the same bubble over the ideal time instead);
// ZB-H1 with T_F = T_B = T_W: bubble (p-1)(T_F + T_B - T_W) = (p-1)·T against 3·m·T of
// compute (arXiv 2401.10241 sec. 2.1), so (p-1)/(3m+p-1).
double theoretical_bubble(ScheduleKind kind, const ScheduleShape& shape);
std::string bubble_formula(ScheduleKind kind);

// Per rank and chunk: the most micro-batches whose forward has run and whose activations
// are still held (until B, or until W when the backward is split).
std::vector<std::vector<int>> peak_in_flight(const Schedule& schedule);

// One rank's activations held over a step: for every moment it takes a micro-batch (its input
// arrives, or its forward on stage 0 starts), how many micro-batches each chunk holds just after.
// Any sum over the chunks (layers, buffers) peaks at one of these moments, since only a take
// raises it; the chunks' own peaks fall at different moments, so the peak of the sum is less
// than the sum of the peaks. Each distinct count is kept once, where it first occurs (a steady
// state repeats the same few for every micro-batch; a peak over them is the same).
using ChunkOccupancy = std::vector<std::vector<int>>;  // [moment][chunk]
// Per rank, in the order `order` issues the actions.
std::vector<ChunkOccupancy> chunk_occupancy(const Schedule& schedule, const std::vector<std::vector<Action>>& order);
// The most of sum over chunks c of held[c] * per_chunk[c] at once (0 for a rank that holds nothing).
int peak_held(const ChunkOccupancy& occupancy, const std::vector<int>& per_chunk);
// Per rank, each of its `chunks` chunks' own peak over its occupancy (what peak_in_flight gives).
std::vector<std::vector<int>> peak_in_flight(const std::vector<ChunkOccupancy>& occupancy, int chunks);

// The compute passes of one step on one rank, over all its chunks: forwards (F), input-gradient
// passes (B), and weight-gradient passes, fused into B unless the backward is split, where they
// run as W actions of their own (`weight_grad_deferred`, zero-bubble schedules). What train's
// executor counts as it runs them (PipelineStepStats::passes) and plan reports.
struct PassCounts {
    int forward = 0, input_grad = 0, weight_grad = 0, weight_grad_deferred = 0;
    bool operator==(const PassCounts&) const = default;
    PassCounts& operator+=(const PassCounts& other);
};
// Per pipeline rank, in the schedule's order.
std::vector<PassCounts> pass_counts(const Schedule& schedule);
// Without a pipeline: each of `microbatches` micro-batches forward, then a whole backward.
PassCounts unpipelined_pass_counts(int microbatches);
// The same for the ranks' actions in another order (blocking transfers pull receives ahead).
std::vector<std::vector<int>> peak_in_flight(const Schedule& schedule, const std::vector<std::vector<Action>>& order);

// "F3" / "B3" / "W3", with ".c" for the chunk when v > 1.
std::string action_label(const Action& action, int virtual_stages);
// The compute order of every rank, one line each, with the theoretical bubble and the
// peak micro-batches in flight (what --print-schedule shows).
void print_schedule(std::ostream& out, const Schedule& schedule);

namespace detail {
// The compute order of each rank (F/B/W only); make_schedule adds the transfers.
using ComputeOrder = std::vector<std::vector<Action>>;
ComputeOrder gpipe_order(const ScheduleShape& shape);
ComputeOrder one_f_one_b_order(const ScheduleShape& shape);
ComputeOrder interleaved_order(const ScheduleShape& shape);
ComputeOrder zero_bubble_h1_order(const ScheduleShape& shape);

// One rank's forward and backward steps in 1F1B's order (PipeDream-Flush, arXiv 2104.04473
// sec. 2.2): `warmup` forwards, then one forward and one backward alternately until all `steps`
// forwards have run, then the remaining backwards. 1F1B, interleaved 1F1B and ZB-H1 share this
// order and differ only in the warm-up, the number of steps and what a step appends:
// `add(kind, step, draining)` appends it, `draining` for the backwards after the last forward.
template <typename AddStep>
void one_f_one_b_steps(int warmup, int steps, AddStep&& add) {
    int forward = 0;
    int backward = 0;
    while (forward < warmup) add(ActionKind::forward, forward++, false);
    while (forward < steps) {
        add(ActionKind::forward, forward++, false);
        add(ActionKind::backward, backward++, false);
    }
    while (backward < steps) add(ActionKind::backward, backward++, true);
}
}  // namespace detail

}  // namespace parbench

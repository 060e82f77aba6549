#include "theory/pipeline/schedule.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "core/error.hpp"

namespace parbench {
namespace {

std::string text(int value) { return std::to_string(value); }

// Adds the transfers around each compute action: a forward receives its input from the
// previous virtual stage and sends its output to the next; a backward (B) receives the
// gradient of its output from the next stage and sends its input's gradient to the previous.
// W exchanges nothing.
std::vector<std::vector<Action>> with_transfers(const detail::ComputeOrder& order, const ScheduleShape& shape) {
    const int p = shape.stages;
    const int last_stage = p * shape.virtual_stages - 1;
    std::vector<std::vector<Action>> ranks(order.size());
    for (int rank = 0; rank < p; ++rank) {
        auto& out = ranks[static_cast<std::size_t>(rank)];
        out.reserve(3 * order[static_cast<std::size_t>(rank)].size());  // at most a receive and a send per pass
        for (const Action& action : order[static_cast<std::size_t>(rank)]) {
            const int stage = action.chunk * p + rank;
            const int previous = (stage - 1 + p) % p;
            const int next = (stage + 1) % p;
            if (action.kind == ActionKind::forward) {
                if (stage > 0) out.push_back(Action{ActionKind::recv_activation, action.microbatch, action.chunk, previous});
                out.push_back(action);
                if (stage < last_stage)
                    out.push_back(Action{ActionKind::send_activation, action.microbatch, action.chunk, next});
            } else if (action.kind == ActionKind::backward) {
                if (stage < last_stage)
                    out.push_back(Action{ActionKind::recv_gradient, action.microbatch, action.chunk, next});
                out.push_back(action);
                if (stage > 0) out.push_back(Action{ActionKind::send_gradient, action.microbatch, action.chunk, previous});
            } else {
                out.push_back(action);
            }
        }
    }
    return ranks;
}

}  // namespace

ScheduleKind parse_schedule_kind(const std::string& name) {
    if (name == "gpipe") return ScheduleKind::gpipe;
    if (name == "1f1b") return ScheduleKind::one_f_one_b;
    if (name == "interleaved") return ScheduleKind::interleaved;
    if (name == "zb-h1") return ScheduleKind::zero_bubble_h1;
    throw UsageError("--schedule '" + name + "': use gpipe, 1f1b, interleaved or zb-h1");
}

std::string schedule_kind_name(ScheduleKind kind) {
    switch (kind) {
        case ScheduleKind::gpipe: return "gpipe";
        case ScheduleKind::one_f_one_b: return "1f1b";
        case ScheduleKind::interleaved: return "interleaved";
        case ScheduleKind::zero_bubble_h1: return "zb-h1";
    }
    return "unknown";
}

int minimum_microbatches(ScheduleKind kind, int stages) {
    // Interleaving walks the micro-batches in groups of p through each chunk.
    return kind == ScheduleKind::interleaved ? stages : 1;
}

void validate_schedule_shape(ScheduleKind kind, const ScheduleShape& shape) {
    const int p = shape.stages;
    const int m = shape.microbatches;
    const int v = shape.virtual_stages;
    if (p < 1) throw UsageError("--pp must be at least 1");
    if (m < 1) throw UsageError("--microbatches must be at least 1");
    if (v < 1) throw UsageError("--virtual-stages must be at least 1");
    if (kind != ScheduleKind::interleaved && v != 1)
        throw UsageError("--virtual-stages " + text(v) + " applies to --schedule interleaved only; drop it or use "
                         "--schedule interleaved");
    if (kind == ScheduleKind::interleaved) {
        if (p < 2) throw UsageError("--schedule interleaved needs --pp 2 or more (one rank has no one to interleave with)");
        if (v < 2)
            throw UsageError("--schedule interleaved needs --virtual-stages 2 or more (with 1 it is --schedule 1f1b)");
    }
    const int minimum = minimum_microbatches(kind, p);
    if (m < minimum)
        throw UsageError("--microbatches " + text(m) + " is fewer than --schedule " + schedule_kind_name(kind) +
                         " needs with --pp " + text(p) + ": use at least " + text(minimum));
    if (kind == ScheduleKind::interleaved && m % p != 0)
        throw UsageError("--microbatches " + text(m) + ": --schedule interleaved takes the micro-batches in groups of "
                         "--pp " + text(p) + "; use a multiple of " + text(p));
}

Schedule make_schedule(ScheduleKind kind, const ScheduleShape& shape) {
    validate_schedule_shape(kind, shape);
    Schedule schedule;
    schedule.kind = kind;
    schedule.shape = shape;
    schedule.split_backward = kind == ScheduleKind::zero_bubble_h1;
    detail::ComputeOrder order;
    switch (kind) {
        case ScheduleKind::gpipe: order = detail::gpipe_order(shape); break;
        case ScheduleKind::one_f_one_b: order = detail::one_f_one_b_order(shape); break;
        case ScheduleKind::interleaved: order = detail::interleaved_order(shape); break;
        case ScheduleKind::zero_bubble_h1: order = detail::zero_bubble_h1_order(shape); break;
    }
    schedule.ranks = with_transfers(order, shape);
    return schedule;
}

double theoretical_bubble(ScheduleKind kind, const ScheduleShape& shape) {
    const double p = shape.stages;
    const double m = shape.microbatches;
    const double v = shape.virtual_stages;
    switch (kind) {
        case ScheduleKind::gpipe:
        case ScheduleKind::one_f_one_b: return (p - 1.0) / (m + p - 1.0);
        case ScheduleKind::interleaved: return (p - 1.0) / (v * m + p - 1.0);
        case ScheduleKind::zero_bubble_h1: return (p - 1.0) / (3.0 * m + p - 1.0);
    }
    return 0.0;
}

std::string bubble_formula(ScheduleKind kind) {
    switch (kind) {
        case ScheduleKind::gpipe:
        case ScheduleKind::one_f_one_b: return "(p-1)/(m+p-1)";
        case ScheduleKind::interleaved: return "(p-1)/(v*m+p-1)";
        case ScheduleKind::zero_bubble_h1: return "(p-1)/(3m+p-1), T_F = T_B = T_W";
    }
    return "";
}

std::vector<std::vector<int>> peak_in_flight(const Schedule& schedule) {
    return peak_in_flight(schedule, schedule.ranks);
}

std::vector<ChunkOccupancy> chunk_occupancy(const Schedule& schedule, const std::vector<std::vector<Action>>& order) {
    const auto v = static_cast<std::size_t>(schedule.shape.virtual_stages);
    const ActionKind release = schedule.split_backward ? ActionKind::weight : ActionKind::backward;
    std::vector<ChunkOccupancy> ranks;
    for (std::size_t rank = 0; rank < order.size(); ++rank) {
        std::vector<int> held(v, 0);
        ChunkOccupancy moments;
        // The same counts recur every step of a steady state: kept once (a peak is a maximum).
        std::set<std::vector<int>> seen;
        for (const Action& action : order[rank]) {
            // A micro-batch is taken by its input's arrival (its forward on stage 0).
            const bool first_stage = action.chunk * schedule.shape.stages + static_cast<int>(rank) == 0;
            if (action.kind == ActionKind::recv_activation || (action.kind == ActionKind::forward && first_stage)) {
                ++held[static_cast<std::size_t>(action.chunk)];
                if (seen.insert(held).second) moments.push_back(held);
            } else if (action.kind == release) {
                --held[static_cast<std::size_t>(action.chunk)];
            }
        }
        ranks.push_back(std::move(moments));
    }
    return ranks;
}

int peak_held(const ChunkOccupancy& occupancy, const std::vector<int>& per_chunk) {
    int peak = 0;
    for (const std::vector<int>& held : occupancy) {
        int sum = 0;
        for (std::size_t c = 0; c < held.size(); ++c) sum += held[c] * per_chunk.at(c);
        peak = std::max(peak, sum);
    }
    return peak;
}

std::vector<std::vector<int>> peak_in_flight(const Schedule& schedule, const std::vector<std::vector<Action>>& order) {
    return peak_in_flight(chunk_occupancy(schedule, order), schedule.shape.virtual_stages);
}

std::vector<std::vector<int>> peak_in_flight(const std::vector<ChunkOccupancy>& occupancy, int chunks) {
    std::vector<std::vector<int>> peaks;
    for (const ChunkOccupancy& moments : occupancy) {
        std::vector<int> peak(static_cast<std::size_t>(chunks), 0);
        for (const std::vector<int>& held : moments)
            for (std::size_t c = 0; c < peak.size(); ++c) peak[c] = std::max(peak[c], held[c]);
        peaks.push_back(std::move(peak));
    }
    return peaks;
}

std::string action_label(const Action& action, int virtual_stages) {
    std::string label;
    switch (action.kind) {
        case ActionKind::forward: label = "F"; break;
        case ActionKind::backward: label = "B"; break;
        case ActionKind::weight: label = "W"; break;
        case ActionKind::send_activation: label = "send-act"; break;
        case ActionKind::recv_activation: label = "recv-act"; break;
        case ActionKind::send_gradient: label = "send-grad"; break;
        case ActionKind::recv_gradient: label = "recv-grad"; break;
    }
    label += std::to_string(action.microbatch);
    if (virtual_stages > 1) label += "." + std::to_string(action.chunk);
    return label;
}

void print_schedule(std::ostream& out, const Schedule& schedule) {
    const ScheduleShape& s = schedule.shape;
    char bubble[64];
    std::snprintf(bubble, sizeof bubble, "%.4f", theoretical_bubble(schedule.kind, s));
    out << "# schedule " << schedule_kind_name(schedule.kind) << ": p=" << s.stages << " ranks, m=" << s.microbatches
        << " micro-batches, v=" << s.virtual_stages << " chunks per rank"
        << (schedule.split_backward ? "; backward split into B (input grad) and W (weight grad)" : "") << "\n";
    out << "# theoretical bubble " << bubble << " = " << bubble_formula(schedule.kind)
        << " (idle / step time, balanced stages, free transfers)\n";
    out << "# peak micro-batches in flight per rank:";
    const std::vector<ChunkOccupancy> occupancy = chunk_occupancy(schedule, schedule.ranks);
    const std::vector<std::vector<int>> peaks = peak_in_flight(schedule);
    for (std::size_t rank = 0; rank < peaks.size(); ++rank) {
        const std::vector<int>& chunks = peaks[rank];
        out << " ";
        for (std::size_t c = 0; c < chunks.size(); ++c) out << (c ? "+" : "") << chunks[c];
        // The chunks share one pool, sized by what they hold at once (partition.hpp).
        if (chunks.size() > 1) out << " (" << peak_held(occupancy[rank], std::vector<int>(chunks.size(), 1)) << " at once)";
    }
    out << "\n";
    if (s.virtual_stages > 1) out << "# labels: <pass><micro-batch>.<chunk>; chunk c of rank r is virtual stage c*p + r\n";
    for (std::size_t rank = 0; rank < schedule.ranks.size(); ++rank) {
        out << "rank " << rank << ":";
        for (const Action& action : schedule.ranks[rank])
            if (action.is_compute()) out << " " << action_label(action, s.virtual_stages);
        out << "\n";
    }
}

PassCounts& PassCounts::operator+=(const PassCounts& other) {
    forward += other.forward;
    input_grad += other.input_grad;
    weight_grad += other.weight_grad;
    weight_grad_deferred += other.weight_grad_deferred;
    return *this;
}

std::vector<PassCounts> pass_counts(const Schedule& schedule) {
    std::vector<PassCounts> counts(schedule.ranks.size());
    for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
        for (const Action& action : schedule.ranks[r]) {
            if (action.kind == ActionKind::forward) {
                ++counts[r].forward;
            } else if (action.kind == ActionKind::backward) {
                ++counts[r].input_grad;
                if (!schedule.split_backward) ++counts[r].weight_grad;
            } else if (action.kind == ActionKind::weight) {
                ++counts[r].weight_grad;
                ++counts[r].weight_grad_deferred;
            }
        }
    }
    return counts;
}

PassCounts unpipelined_pass_counts(int microbatches) { return PassCounts{microbatches, microbatches, microbatches, 0}; }

}  // namespace parbench

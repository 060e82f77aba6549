#include "train/pipeline/pipeline_executor.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/nvtx.hpp"
#include "theory/pipeline/paired_passes.hpp"

namespace parbench {
namespace {

TimelineKind compute_kind(const Action& action) {
    return action.kind == ActionKind::forward    ? TimelineKind::forward
           : action.kind == ActionKind::backward ? TimelineKind::backward
                                                 : TimelineKind::weight;
}

}  // namespace

const char* timeline_kind_name(TimelineKind kind) {
    switch (kind) {
        case TimelineKind::forward: return "F";
        case TimelineKind::backward: return "B";
        case TimelineKind::weight: return "W";
        case TimelineKind::send_activation: return "send act";
        case TimelineKind::recv_activation: return "recv act";
        case TimelineKind::send_gradient: return "send grad";
        case TimelineKind::recv_gradient: return "recv grad";
        case TimelineKind::embedding_sync: return "tied embedding allreduce";
        case TimelineKind::gradient_reduce: return "dp gradient reduction";
        case TimelineKind::optimizer: return "optimizer";
    }
    return "?";
}

const char* timeline_kind_category(TimelineKind kind) {
    switch (kind) {
        case TimelineKind::forward:
        case TimelineKind::backward:
        case TimelineKind::weight: return "compute";
        case TimelineKind::embedding_sync:
        case TimelineKind::gradient_reduce: return "collective";
        case TimelineKind::optimizer: return "optimizer";
        default: return "p2p";
    }
}

PipelineExecutor::PipelineExecutor(const Schedule& schedule, int pp_rank, P2pMode mode, Model& model,
                                   TrainingScheme& scheme, Communicator& pp, Ops& ops, MemoryLedger& ledger,
                                   Communicator& host, std::vector<int> host_rank_of_pp_rank, bool pair_passes)
    : schedule_(schedule), pp_rank_(pp_rank), mode_(mode),
      steps_(rank_steps(schedule.ranks.at(static_cast<std::size_t>(pp_rank)), mode)), model_(model), scheme_(scheme),
      pp_(pp), ops_(ops), host_(host), host_rank_of_pp_rank_(std::move(host_rank_of_pp_rank)), origin_(Clock::now()) {
    if (pair_passes) {
        fibers_.emplace();
        pair_ends_ = paired_group_ends(steps_, pp_rank, schedule.shape.stages);
    }
    if (static_cast<int>(host_rank_of_pp_rank_.size()) != pp.size())
        throw std::logic_error("PipelineExecutor: one host rank per pipeline rank expected");
    const int shared = model.shared_unit();
    if (shared >= 0)
        shared_scratch_ = ledger.allocate(MemoryCategory::grads,
                                          model.layout().units().at(static_cast<std::size_t>(shared)).numel * sizeof(float));
}

void PipelineExecutor::add_event(TimelineKind kind, Clock::time_point start, Clock::time_point end, int microbatch,
                                 int stage) {
    const double duration = std::chrono::duration<double, std::micro>(end - start).count();
    switch (timeline_kind_category(kind)[0]) {
        case 'c':
            if (kind <= TimelineKind::weight) stats_.compute_ms += duration / 1000.0;
            break;
        case 'p':
            if (kind == TimelineKind::recv_activation || kind == TimelineKind::recv_gradient)
                stats_.recv_wait_ms += duration / 1000.0;
            else
                stats_.send_ms += duration / 1000.0;
            break;
        default: break;
    }
    if (!recording_) return;
    events_.push_back(TimelineEvent{kind, std::chrono::duration<double, std::micro>(start - origin_).count(), duration,
                                    microbatch, stage, step_});
}

int PipelineExecutor::note_send(int peer, double issued_us) {
    std::vector<double>& issued = send_issued_us_[peer];
    issued.push_back(issued_us);
    return static_cast<int>(issued.size()) - 1;
}

int PipelineExecutor::note_recv(int peer, double posted_us) {
    std::vector<double>& posted = recv_posted_us_[peer];
    posted.push_back(posted_us);
    return static_cast<int>(posted.size()) - 1;
}

void PipelineExecutor::wait_for_send(const void* buffer) {
    auto found = sends_in_flight_.find(buffer);
    if (found == sends_in_flight_.end()) return;
    const double start = now_us();
    found->second.request.wait();
    blocked_.push_back(BlockedInterval{start, now_us(), found->second.peer, found->second.index, -1, -1});
    sends_in_flight_.erase(found);
}

double PipelineExecutor::settle_peer_waits() {
    // What each peer needs from this rank: when it issued its sends to the peer, then when
    // it posted its receives from it. The peer's counts mirror this rank's.
    std::map<int, std::vector<double>> outgoing, incoming;
    for (const auto* side : {&send_issued_us_, &recv_posted_us_})
        for (const auto& [peer, times] : *side) {
            outgoing[peer];
            incoming[peer];
        }
    for (auto& [peer, values] : outgoing) {
        const auto& sent = send_issued_us_[peer];
        const auto& posted = recv_posted_us_[peer];
        values.insert(values.end(), sent.begin(), sent.end());
        values.insert(values.end(), posted.begin(), posted.end());
        // The peer's sends to this rank (this rank's receives), then its receives from this rank.
        incoming[peer].resize(posted.size() + sent.size());
    }
    {
        std::vector<Request> requests;
        for (auto& [peer, values] : incoming)
            if (!values.empty())
                requests.push_back(host_.irecv(values.data(), values.size(), DType::float64,
                                               host_rank_of_pp_rank_.at(static_cast<std::size_t>(peer))));
        for (auto& [peer, values] : outgoing)
            if (!values.empty())
                requests.push_back(host_.isend(values.data(), values.size(), DType::float64,
                                               host_rank_of_pp_rank_.at(static_cast<std::size_t>(peer))));
        for (Request& request : requests) request.wait();
    }
    double waiting_us = 0.0;
    for (const BlockedInterval& interval : blocked_) {
        double peer_ready_us = -1e300;
        if (interval.recv_peer >= 0)  // the peer's send of the message this rank receives
            peer_ready_us = std::max(peer_ready_us, incoming[interval.recv_peer].at(
                                                        static_cast<std::size_t>(interval.recv_index)));
        if (interval.send_peer >= 0)  // the peer's receive of the message this rank sends
            peer_ready_us = std::max(
                peer_ready_us, incoming[interval.send_peer].at(recv_posted_us_[interval.send_peer].size() +
                                                               static_cast<std::size_t>(interval.send_index)));
        waiting_us += std::clamp(peer_ready_us - interval.start_us, 0.0, interval.end_us - interval.start_us);
    }
    send_issued_us_.clear();
    recv_posted_us_.clear();
    blocked_.clear();
    return waiting_us / 1000.0;
}

float* PipelineExecutor::transfer_buffer(const Action& action) {
    switch (action.kind) {
        case ActionKind::recv_activation: return model_.boundary_input(action.microbatch, action.chunk);
        case ActionKind::send_activation:
            return const_cast<float*>(model_.boundary_output(action.microbatch, action.chunk));
        default: return model_.boundary_gradient(action.microbatch, action.chunk);
    }
}

void PipelineExecutor::run_pass(const Action& action, float loss_scale) {
    if (action.kind == ActionKind::forward) {
        // A slot's output may still be on its way to the next stage from an earlier micro-batch.
        wait_for_send(model_.boundary_output(action.microbatch, action.chunk));
        if (action.chunk == 0) scheme_.begin_microbatch(action.microbatch);
        NvtxRange range(numbered_range_name("F", action.microbatch));
        model_.forward_chunk(action.microbatch, action.chunk, scheme_);
        ++stats_.passes.forward;
        return;
    }
    if (action.kind == ActionKind::backward) {
        wait_for_send(model_.boundary_gradient(action.microbatch, action.chunk));
        // Its layer stores go back to the rank's pool after it (after W when split), and another
        // chunk may take the one its output was sent from: that send must be done.
        wait_for_send(model_.boundary_output(action.microbatch, action.chunk));
        NvtxRange range(numbered_range_name("B", action.microbatch));
        model_.backward_chunk(action.microbatch, action.chunk, loss_scale,
                              schedule_.split_backward ? BackwardPass::input : BackwardPass::full, scheme_);
        ++stats_.passes.input_grad;
        if (!schedule_.split_backward) ++stats_.passes.weight_grad;
        return;
    }
    NvtxRange range(numbered_range_name("W", action.microbatch));
    model_.backward_chunk(action.microbatch, action.chunk, loss_scale, BackwardPass::weight, scheme_);
    ++stats_.passes.weight_grad;
    ++stats_.passes.weight_grad_deferred;
}

void PipelineExecutor::compute(const Action& action, float loss_scale) {
    const auto start = Clock::now();
    run_pass(action, loss_scale);
    add_event(compute_kind(action), start, Clock::now(), action.microbatch, stage_of(action.chunk));
}

void PipelineExecutor::compute_pair(std::size_t first, std::size_t last, float loss_scale) {
    const Action& forward = *steps_[first].compute;
    const Action& backward = *steps_[last].compute;
    // The backward's input first: the paired passes start together.
    for (std::size_t i = first + 1; i < last; ++i)
        if (steps_[i].recv) transfer(Step{std::nullopt, std::nullopt, steps_[i].recv});
    // Each fiber's running time, one timeline event per stretch it ran between two switches.
    const Action* actions[2] = {&forward, &backward};
    Clock::time_point resumed[2];
    const auto stretch_ends = [&](int fiber) {
        const Action& action = *actions[fiber];
        add_event(compute_kind(action), resumed[fiber], Clock::now(), action.microbatch, stage_of(action.chunk));
    };
    FiberPair& fibers = *fibers_;
    model_.set_moe_exchange_switch([&] {
        const int fiber = fibers.current();
        stretch_ends(fiber);
        fibers.yield();
        resumed[fiber] = Clock::now();
    });
    const auto pass = [&](int fiber) {
        return [&, fiber] {
            resumed[fiber] = Clock::now();
            run_pass(*actions[fiber], loss_scale);
            stretch_ends(fiber);
            // F(j)'s activation leaves as soon as F(j) ends, the next stage waiting on it, not on
            // B(i). A blocking send here cannot deadlock: the next stage posts its receive after
            // its own pair, which needs nothing of this rank's B(i).
            if (fiber == 0)
                for (std::size_t i = first + 1; i < last; ++i)
                    if (steps_[i].send) transfer(Step{std::nullopt, steps_[i].send, std::nullopt});
        };
    };
    try {
        fibers.run(pass(0), pass(1));
    } catch (...) {
        model_.set_moe_exchange_switch({});
        throw;
    }
    model_.set_moe_exchange_switch({});
}

void PipelineExecutor::transfer(const Step& step) {
    const std::size_t count = model_.boundary_numel();
    auto kind_of = [](const Action& action) {
        switch (action.kind) {
            case ActionKind::send_activation: return TimelineKind::send_activation;
            case ActionKind::recv_activation: return TimelineKind::recv_activation;
            case ActionKind::send_gradient: return TimelineKind::send_gradient;
            default: return TimelineKind::recv_gradient;
        }
    };
    const auto start = Clock::now();
    if (step.send) stats_.p2p_bytes += count * sizeof(float);
    if (mode_ == P2pMode::nonblocking) {
        if (step.send) {
            float* buffer = transfer_buffer(*step.send);
            wait_for_send(buffer);
            const int peer = step.send->peer;
            const double issued = now_us();
            const int index = note_send(peer, issued);
            sends_in_flight_[buffer] = InFlightSend{pp_.isend(buffer, count, DType::float32, peer), peer, index};
            blocked_.push_back(BlockedInterval{issued, now_us(), peer, index, -1, -1});
            add_event(kind_of(*step.send), start, Clock::now(), step.send->microbatch, stage_of(step.send->chunk));
        }
        if (step.recv) {
            const auto recv_start = Clock::now();
            float* buffer = transfer_buffer(*step.recv);
            wait_for_send(buffer);
            const int peer = step.recv->peer;
            const double posted = now_us();
            const int index = note_recv(peer, posted);
            Request request = pp_.irecv(buffer, count, DType::float32, peer);
            request.wait();
            blocked_.push_back(BlockedInterval{posted, now_us(), -1, -1, peer, index});
            add_event(kind_of(*step.recv), recv_start, Clock::now(), step.recv->microbatch, stage_of(step.recv->chunk));
        }
        return;
    }
    const double issued = now_us();
    if (step.send && step.recv) {
        // The send's buffer first: the receive may take the slot the send's micro-batch left.
        float* send_buffer = transfer_buffer(*step.send);
        float* recv_buffer = transfer_buffer(*step.recv);
        // Both at once and both completed before going on, as MPI_Sendrecv (or Megatron-LM's
        // batch_isend_irecv); built from isend/irecv so it matches the peers' plain send/recv.
        const int send_index = note_send(step.send->peer, issued);
        const int recv_index = note_recv(step.recv->peer, issued);
        Request sent = pp_.isend(send_buffer, count, DType::float32, step.send->peer);
        Request received = pp_.irecv(recv_buffer, count, DType::float32, step.recv->peer);
        received.wait();
        sent.wait();
        blocked_.push_back(BlockedInterval{issued, now_us(), step.send->peer, send_index, step.recv->peer, recv_index});
        // Its time counts as the receive's wait (the send's part cannot be told apart).
        add_event(kind_of(*step.recv), start, Clock::now(), step.recv->microbatch, stage_of(step.recv->chunk));
    } else if (step.send) {
        const int index = note_send(step.send->peer, issued);
        pp_.send(transfer_buffer(*step.send), count, DType::float32, step.send->peer);
        blocked_.push_back(BlockedInterval{issued, now_us(), step.send->peer, index, -1, -1});
        add_event(kind_of(*step.send), start, Clock::now(), step.send->microbatch, stage_of(step.send->chunk));
    } else {
        const int index = note_recv(step.recv->peer, issued);
        pp_.recv(transfer_buffer(*step.recv), count, DType::float32, step.recv->peer);
        blocked_.push_back(BlockedInterval{issued, now_us(), -1, -1, step.recv->peer, index});
        add_event(kind_of(*step.recv), start, Clock::now(), step.recv->microbatch, stage_of(step.recv->chunk));
    }
}

// GPT ties the output projection to the token embedding, which lives on the first stage
// and the last: each holds a copy and adds the other's gradient (Megatron-LM's embedding
// group, arXiv 2104.04473 sec. 2), so both copies take the same update.
void PipelineExecutor::sum_shared_gradients() {
    const int unit = model_.shared_unit();
    if (unit < 0) return;
    const auto start = Clock::now();
    const std::size_t count = model_.layout().units().at(static_cast<std::size_t>(unit)).numel;
    const int peer = pp_rank_ == 0 ? schedule_.shape.stages - 1 : 0;
    float* gradients = scheme_.gradients(unit);
    const double issued = now_us();
    const int send_index = note_send(peer, issued);
    const int recv_index = note_recv(peer, issued);
    pp_.sendrecv(gradients, peer, shared_scratch_.as<float>(), peer, count, DType::float32);
    blocked_.push_back(BlockedInterval{issued, now_us(), peer, send_index, peer, recv_index});
    ops_.add_inplace(gradients, shared_scratch_.as<float>(), count);
    add_event(TimelineKind::embedding_sync, start, Clock::now(), -1, -1);
}

PipelineStepStats PipelineExecutor::run_step(int step, float loss_scale, Clock::time_point step_start) {
    step_ = step;
    stats_ = PipelineStepStats{};
    scheme_.begin_step(step + 1);
    for (std::size_t i = 0; i < steps_.size(); ++i) {
        const Step& s = steps_[i];
        const int pair_end = pair_ends_.empty() ? -1 : pair_ends_[i];
        if (pair_end >= 0) {
            compute_pair(i, static_cast<std::size_t>(pair_end), loss_scale);
            i = static_cast<std::size_t>(pair_end);
        } else if (s.compute) {
            compute(*s.compute, loss_scale);
        } else {
            transfer(s);
        }
    }
    {
        const auto start = Clock::now();
        for (auto& [buffer, send] : sends_in_flight_) {
            const double wait_start = now_us();
            send.request.wait();
            blocked_.push_back(BlockedInterval{wait_start, now_us(), send.peer, send.index, -1, -1});
        }
        sends_in_flight_.clear();
        stats_.send_ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
    stats_.pipeline_ms = std::chrono::duration<double, std::milli>(Clock::now() - step_start).count();
    sum_shared_gradients();
    auto start = Clock::now();
    scheme_.end_backward();
    add_event(TimelineKind::gradient_reduce, start, Clock::now(), -1, -1);
    start = Clock::now();
    scheme_.optimizer_step(step + 1);  // AdamW's t counts from 1
    add_event(TimelineKind::optimizer, start, Clock::now(), -1, -1);
    return stats_;
}

}  // namespace parbench

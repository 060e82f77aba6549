#include "train/moe/moe_layer.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>

#include "core/nvtx.hpp"
#include "theory/moe_buffers.hpp"
#include "train/models/transformer_parts.hpp"

namespace parbench {
namespace {

int as_int(std::size_t n) { return static_cast<int>(n); }

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point start, Clock::time_point end) {
    return std::chrono::duration<double, std::milli>(end - start).count();
}

}  // namespace

// One exchange half in flight (--moe-a2a-overlap), timed by MoeExchangeStats' convention: `ms`
// from its issue to the test() or wait() that saw it complete, `exposed_ms` the issue (counted
// by issue_exchange), every test() and the wait(). Default-constructed: nothing in flight.
class MoeLayer::InFlight {
  public:
    InFlight() = default;
    InFlight(Request request, Ops& ops, Clock::time_point issued, double& ms, double& exposed_ms)
        : request_(std::move(request)), ops_(&ops), issued_(issued), ms_(&ms), exposed_ms_(&exposed_ms),
          done_(false) {}
    // Lets MPI progress the exchange (and notices its completion) without waiting for it. On a
    // GPU it asks whether the half's event has passed; once it has, its rows are in place.
    void poll() {
        if (done_) return;
        const auto start = Clock::now();
        const bool done = request_.test();
        const auto end = Clock::now();
        *exposed_ms_ += ms_between(start, end);
        if (done) finish(end);
    }
    // On a GPU, wait() only makes the stream wait for the half (NCCL's side stream): the syncs
    // around it leave out the compute queued before it and time how long the stream stands
    // waiting for the half, the host's blocked time as on the CPU (no-ops there).
    void wait() {
        if (done_) return;
        ops_->synchronize();
        const auto start = Clock::now();
        request_.wait();
        ops_->synchronize();
        const auto end = Clock::now();
        *exposed_ms_ += ms_between(start, end);
        finish(end);
    }

  private:
    void finish(Clock::time_point end) {
        *ms_ += ms_between(issued_, end);
        done_ = true;
    }
    Request request_;
    Ops* ops_ = nullptr;
    Clock::time_point issued_;
    double* ms_ = nullptr;
    double* exposed_ms_ = nullptr;
    bool done_ = true;
};

MoeLayer::MoeLayer(const MoeMemoryShape& shape, MoeScore score, const MoeSettings& settings, Ops& ops,
                   ActivationArena& arena, Communicator* expert_group, Communicator* expert_tensor_group,
                   Matmuls* expert_matmuls)
    : shape_(shape), settings_(settings), ops_(ops), expert_matmuls_(expert_matmuls),
      expert_group_(shape.ep > 1 ? expert_group : nullptr),
      expert_tensor_group_(shape.etp > 1 ? expert_tensor_group : nullptr),
      local_experts_(as_int(shape.experts / shape.ep)), kept_per_expert_(shape.experts) {
    if (shape.ep > 1 && (expert_group == nullptr || static_cast<std::size_t>(expert_group->size()) != shape.ep))
        throw std::logic_error("MoeLayer: an expert-parallel shape needs its group of ep ranks");
    if (shape.experts % shape.ep != 0) throw std::logic_error("MoeLayer: ep must divide the experts");
    if (shape.etp > 1 &&
        (expert_tensor_group == nullptr || static_cast<std::size_t>(expert_tensor_group->size()) != shape.etp))
        throw std::logic_error("MoeLayer: an expert-tensor-parallel shape needs its group of etp ranks");
    router_ = RouterShape{as_int(shape.tokens), as_int(shape.experts), as_int(shape.top_k), score,
                          settings.capacity_factor};
    // The scratch from the table the memory theory sums (theory/moe_buffers.hpp).
    const MoeScratchBuffers sizes = moe_scratch_buffers(shape);
    logits_ = arena.floats(sizes.logits);
    dlogits_ = arena.floats(sizes.dlogits);
    dweights_ = arena.floats(sizes.dweights);
    dexpert_out_ = arena.floats(sizes.dexpert_out);
    ddispatched_ = arena.floats(sizes.ddispatched);
    dreceived_out_ = arena.floats_or_null(sizes.dreceived_out);
    dreceived_ = arena.floats_or_null(sizes.dreceived);
    dglu_ = arena.floats(sizes.dglu);
    dgate_ = arena.floats(sizes.dgate);
    dup_ = arena.floats_or_null(sizes.dup);
    expert_tensor_sum_ = arena.floats_or_null(sizes.expert_tensor_sum);
}

MoeActivations MoeLayer::allocate_activations(ActivationArena& arena) const {
    // The kept buffers from the table the memory theory sums (theory/moe_buffers.hpp).
    const MoeKeptBuffers sizes = moe_kept_buffers(shape_);
    auto ints = [&](std::size_t count) { return arena.buffer(count * sizeof(int)).as<int>(); };
    MoeActivations a;
    a.routing.scores = arena.floats(sizes.scores);
    a.routing.chosen = ints(sizes.chosen);
    a.routing.weights = arena.floats(sizes.weights);
    a.routing.slot = ints(sizes.slot);
    a.routing.expert_start = ints(sizes.expert_start);
    a.routing.routed = ints(sizes.routed);
    a.dispatched = arena.floats(sizes.dispatched);
    a.gate = arena.floats(sizes.gate);
    a.up = arena.floats_or_null(sizes.up);
    a.glu = arena.floats(sizes.glu);
    a.expert_out = arena.floats(sizes.expert_out);
    a.shared_gate = arena.floats_or_null(sizes.shared_gate);
    a.shared_up = arena.floats_or_null(sizes.shared_up);
    a.shared_glu = arena.floats_or_null(sizes.shared_glu);
    // Without expert parallelism the experts run on the dispatched rows in place.
    a.received = parallel() ? arena.floats(sizes.received) : a.dispatched;
    a.received_out = parallel() ? arena.floats(sizes.received_out) : a.expert_out;
    if (parallel()) a.received_counts = ints(sizes.received_counts);
    return a;
}

MoeLayer::ChunkOffsets MoeLayer::chunk_offsets(const ExpertChunk& chunk) const {
    const std::size_t C = shape_.hidden, Fr = shape_.routed_hidden();
    const auto first = static_cast<std::size_t>(chunk.first);
    return {first * C, first * Fr, static_cast<std::size_t>(chunk.expert - first_local_expert()) * Fr * C};
}

std::vector<MoeLayer::ExpertChunk> MoeLayer::expert_chunks() const {
    std::vector<ExpertChunk> chunks;
    const int E = as_int(shape_.experts);
    if (!parallel()) {
        for (int e = 0; e < E; ++e)
            chunks.push_back({e, host_.expert_start[e], host_.expert_start[e + 1] - host_.expert_start[e]});
        return chunks;
    }
    const int first_expert = first_local_expert();
    int row = 0;
    for (int source = 0; source < expert_group_->size(); ++source)
        for (int j = 0; j < local_experts_; ++j) {
            const int rows = host_.received_counts[static_cast<std::size_t>(source * local_experts_ + j)];
            chunks.push_back({first_expert + j, row, rows, source});
            row += rows;
        }
    return chunks;
}

// Halves by local expert keep each expert's chunks in one half, in source order; halves by
// source keep the sources in order: either way each expert's weight gradient sums its chunks
// in the blocking path's order, and every chunk's rows sit where the blocking path puts them.
std::pair<int, int> MoeLayer::half_experts(int source, int half) const {
    if (half < 0) return {0, local_experts_};
    if (local_experts_ >= 2) {
        const int middle = local_experts_ / 2;
        return half == 0 ? std::pair{0, middle} : std::pair{middle, local_experts_};
    }
    const bool first_sources = source < expert_group_->size() / 2;
    return (half == 0) == first_sources ? std::pair{0, local_experts_} : std::pair{0, 0};
}

bool MoeLayer::in_half(const ExpertChunk& chunk, int half) const {
    if (half < 0) return true;
    const auto [first, end] = half_experts(chunk.source, half);
    const int local = chunk.expert - first_local_expert();
    return local >= first && local < end;
}

MoeLayer::ExchangePlan MoeLayer::exchange_plan(int half) const {
    const std::size_t C = shape_.hidden;
    const int ranks = expert_group_->size();
    const auto [send_first, send_end] = half_experts(expert_group_->rank(), half);
    ExchangePlan plan;
    std::size_t received = 0;
    for (int q = 0; q < ranks; ++q) {
        const int first = host_.expert_start[static_cast<std::size_t>(q * local_experts_ + send_first)];
        const int end = host_.expert_start[static_cast<std::size_t>(q * local_experts_ + send_end)];
        plan.send_offsets.push_back(static_cast<std::size_t>(first) * C);
        plan.send_counts.push_back(static_cast<std::size_t>(end - first) * C);
        const auto [recv_first, recv_end] = half_experts(q, half);
        std::size_t before = 0, rows = 0, all = 0;
        for (int j = 0; j < local_experts_; ++j) {
            const auto n = static_cast<std::size_t>(host_.received_counts[static_cast<std::size_t>(q * local_experts_ + j)]);
            if (j < recv_first) before += n;
            else if (j < recv_end) rows += n;
            all += n;
        }
        plan.recv_offsets.push_back((received + before) * C);
        plan.recv_counts.push_back(rows * C);
        received += all;
    }
    return plan;
}

void MoeLayer::exchange(const float* from, float* to, const ExchangePlan& plan, bool back, double& ms,
                        double& exposed_ms, double& bytes, MoeExchangeStats& stats) {
    if (exchange_switch_) {
        // --moe-a2a-overlap-1f1b: the partner micro-batch's pass runs while this one travels,
        // polling it (in_flight_) so that MPI moves it on meanwhile.
        InFlight in_flight = issue_exchange(from, to, plan, back, ms, exposed_ms, bytes, stats);
        {
            const PollRegistry::Entry polled(in_flight_, [&in_flight] { in_flight.poll(); });
            exchange_switch_();
        }
        in_flight.wait();
        return;
    }
    // On a GPU the alltoallv is only enqueued: waiting for the work before it and then for it
    // makes the time the exchange's own (no-ops on the CPU).
    ops_.synchronize();
    const auto start = Clock::now();
    if (!back)
        expert_group_->alltoallv(from, plan.send_counts, plan.send_offsets, to, plan.recv_counts, plan.recv_offsets,
                                 DType::float32);
    else
        expert_group_->alltoallv(from, plan.recv_counts, plan.recv_offsets, to, plan.send_counts, plan.send_offsets,
                                 DType::float32);
    ops_.synchronize();
    const double took = ms_between(start, Clock::now());
    ms += took;
    exposed_ms += took;  // the host waited for all of it
    std::size_t sent = 0, received = 0;
    for (std::size_t n : plan.send_counts) sent += n;
    for (std::size_t n : plan.recv_counts) received += n;
    bytes += static_cast<double>(std::max(sent, received) * sizeof(float));
    ++stats.alltoallv_calls;
}

MoeLayer::InFlight MoeLayer::issue_exchange(const float* from, float* to, const ExchangePlan& plan, bool back,
                                            double& ms, double& exposed_ms, double& bytes, MoeExchangeStats& stats) {
    // On a GPU the half starts on NCCL's side stream once the work queued before it is done:
    // waiting for that work here starts its time when its data is ready (a no-op on the CPU).
    ops_.synchronize();
    const auto start = Clock::now();
    Request request =
        !back ? expert_group_->ialltoallv(from, plan.send_counts, plan.send_offsets, to, plan.recv_counts,
                                          plan.recv_offsets, DType::float32)
              : expert_group_->ialltoallv(from, plan.recv_counts, plan.recv_offsets, to, plan.send_counts,
                                          plan.send_offsets, DType::float32);
    exposed_ms += ms_between(start, Clock::now());
    std::size_t sent = 0, received = 0;
    for (std::size_t n : plan.send_counts) sent += n;
    for (std::size_t n : plan.recv_counts) received += n;
    bytes += static_cast<double>(std::max(sent, received) * sizeof(float));
    ++stats.alltoallv_calls;
    return InFlight(std::move(request), ops_, start, ms, exposed_ms);
}

void MoeLayer::expert_forward(float* out, float* gate, float* up, float* act, const float* x, const float* w_gate,
                              const float* w_up, const float* w_down, int rows, int width,
                              const std::function<void()>& between) {
    const int C = as_int(shape_.hidden);
    const std::size_t n = static_cast<std::size_t>(rows) * width;
    auto matmul = [&](float* o, const float* i, const float* w, int N, int in, int outs) {
        if (expert_matmuls_)
            expert_matmuls_->forward(o, i, w, nullptr, N, in, outs);
        else
            ops_.matmul_forward(o, i, w, nullptr, N, in, outs);
        if (between) between();
    };
    matmul(gate, x, w_gate, rows, C, width);
    if (gated()) {
        matmul(up, x, w_up, rows, C, width);
        ops_.swiglu_forward(act, gate, up, n);
    } else {
        ops_.gelu_forward(act, gate, n);
    }
    matmul(out, act, w_down, rows, width, C);
}

void MoeLayer::expert_matmul_backward(float* di, float* dw, const float* d, const float* i, const float* w, int rows,
                                      int in, int outs) {
    if (expert_matmuls_)
        expert_matmuls_->backward(di, dw, nullptr, d, i, w, rows, in, outs);
    else
        ops_.matmul_backward(di, dw, nullptr, d, i, w, rows, in, outs);
}

void MoeLayer::expert_backward(float* dx, float* g_gate, float* g_up, float* g_down, const float* dout,
                               const float* gate, const float* up, const float* act, const float* x,
                               const float* w_gate, const float* w_up, const float* w_down, int rows, int width,
                               const std::function<void()>& between) {
    const int C = as_int(shape_.hidden);
    const std::size_t n = static_cast<std::size_t>(rows) * width;
    ops_.fill(dglu_, 0.0f, n);
    expert_matmul_backward(dglu_, g_down, dout, act, w_down, rows, width, C);
    if (between) between();
    ops_.fill(dgate_, 0.0f, n);
    if (gated()) {
        ops_.fill(dup_, 0.0f, n);
        ops_.swiglu_backward(dgate_, dup_, dglu_, gate, up, n);
    } else {
        ops_.gelu_backward(dgate_, gate, dglu_, n);
    }
    expert_matmul_backward(dx, g_gate, dgate_, x, w_gate, rows, C, width);
    if (between) between();
    if (gated()) expert_matmul_backward(dx, g_up, dup_, x, w_up, rows, C, width);
    if (between) between();
}

void MoeLayer::expert_input_gradient(float* dx, const float* x, const float* w_gate, const float* w_up, int rows,
                                     int width) {
    const int C = as_int(shape_.hidden);
    expert_matmul_backward(dx, nullptr, dgate_, x, w_gate, rows, C, width);
    if (gated()) expert_matmul_backward(dx, nullptr, dup_, x, w_up, rows, C, width);
}

// One pass's exchanges: under expert parallelism the whole exchange's plan, or under
// --moe-a2a-overlap its two halves' plans and the halves in flight. `out` carries the rows to
// the experts' ranks (forward: the dispatch; backward: the output gradients, the combine's
// mirror), `back` what comes back from them (forward: the combine; backward: the input
// gradients, the dispatch's mirror).
struct MoeLayer::PassExchanges {
    explicit PassExchanges(const MoeLayer& of) : layer(of), overlapped(of.parallel() && of.settings_.a2a_overlap) {}
    // The halves in flight (--moe-a2a-overlap), and the partner pass's exchange (-1f1b).
    void poll() {
        for (InFlight* half : {&out[0], &out[1], &back[0], &back[1]}) half->poll();
        layer.poll_partners();
    }
    // The halves the experts run in turn: both under overlap, else all rows at once (-1).
    std::vector<int> runs() const { return overlapped ? std::vector<int>{0, 1} : std::vector<int>{-1}; }

    const MoeLayer& layer;
    const bool overlapped;
    std::optional<ExchangePlan> plan;
    std::vector<ExchangePlan> halves;
    InFlight out[2], back[2];
};

MoeForwardResult MoeLayer::forward(float* out, const MoeActivations& a, const float* x, const MoeWeights& w,
                                   const float* bias, MoeExchangeStats& stats, const RoutingHold& hold) {
    MoeForwardResult result;
    result.counts = route_and_permute(a, x, w, bias, hold);
    PassExchanges pass(*this);
    const std::vector<ExpertChunk> chunks = send_to_experts(a, result.counts, pass, stats);
    experts_forward(a, w, chunks, pass, stats);
    combine(out, a, x, w, pass);
    if (settings_.aux_loss_coeff > 0.0) result.aux_loss = group_aux_loss(a, result.counts);
    poll_partners();  // the model's own ops run next, unpolled
    return result;
}

RoutingCounts MoeLayer::route_and_permute(const MoeActivations& a, const float* x, const MoeWeights& w,
                                          const float* bias, const RoutingHold& hold) {
    const int N = as_int(shape_.tokens), E = as_int(shape_.experts), k = as_int(shape_.top_k);
    const int C = as_int(shape_.hidden);
    // The router in fp32 whatever the precision (Megatron-core's router dtype fp32 keeps the
    // choice stable).
    ops_.matmul_forward(logits_, x, w.router, nullptr, N, C, E);
    const RoutingCounts counts = route(a.routing, bias, hold);
    // Permutation: each kept assignment's token row into its expert-major row.
    ops_.moe_dispatch(a.dispatched, x, a.routing.slot, N, k, C);
    return counts;
}

std::vector<MoeLayer::ExpertChunk> MoeLayer::send_to_experts(const MoeActivations& a, const RoutingCounts& counts,
                                                             PassExchanges& pass, MoeExchangeStats& stats) {
    if (!parallel()) return expert_chunks();
    NvtxRange range("moe dispatch");
    exchange_counts(a, counts, stats);
    pass.plan = exchange_plan();
    // Before the exchange: under --moe-a2a-overlap-1f1b the partner's layers refill host_ while it travels.
    std::vector<ExpertChunk> chunks = expert_chunks();
    if (!pass.overlapped) {
        exchange(a.dispatched, a.received, *pass.plan, false, stats.dispatch_ms, stats.dispatch_exposed_ms,
                 stats.dispatch_bytes, stats);
    } else {
        for (int half = 0; half < 2; ++half) {
            pass.halves.push_back(exchange_plan(half));
            pass.out[half] = issue_exchange(a.dispatched, a.received, pass.halves.back(), false, stats.dispatch_ms,
                                            stats.dispatch_exposed_ms, stats.dispatch_bytes, stats);
        }
    }
    return chunks;
}

void MoeLayer::exchange_counts(const MoeActivations& a, const RoutingCounts& counts, MoeExchangeStats& stats) {
    const int E = as_int(shape_.experts);
    for (int e = 0; e < E; ++e) kept_per_expert_[static_cast<std::size_t>(e)] = counts.kept[static_cast<std::size_t>(e)];
    // The counts go through the device's memory (NCCL reads no host memory): dlogits_ is idle here.
    int* kept_counts = reinterpret_cast<int*>(dlogits_);
    ops_.copy_from_host(kept_counts, kept_per_expert_.data(), static_cast<std::size_t>(E) * sizeof(int));
    ops_.synchronize();  // the time below is the alltoall's and the copy of its result (which waits)
    const auto start = Clock::now();
    expert_group_->alltoall(kept_counts, a.received_counts, static_cast<std::size_t>(local_experts_), DType::int32);
    // The plans (both halves' too) and the chunks read these host copies: in place before either is made.
    host_.received_counts.resize(static_cast<std::size_t>(E));
    ops_.copy_to_host(host_.received_counts.data(), a.received_counts, static_cast<std::size_t>(E) * sizeof(int));
    stats.counts_ms += ms_between(start, Clock::now());
    stats.counts_bytes += static_cast<double>(E * sizeof(int));
    ++stats.alltoall_calls;
}

// Each expert over its rows; under overlap one half's once they have arrived (on a GPU,
// queued behind their arrival), their outputs sent back while the other half's experts run.
void MoeLayer::experts_forward(const MoeActivations& a, const MoeWeights& w, const std::vector<ExpertChunk>& chunks,
                               PassExchanges& pass, MoeExchangeStats& stats) {
    const int Fr = as_int(shape_.routed_hidden());  // a routed expert's width here (Fe/etp)
    for (const int half : pass.runs()) {
        if (half >= 0) pass.out[half].wait();
        for (const ExpertChunk& chunk : chunks) {
            if (chunk.rows == 0 || !in_half(chunk, half)) continue;
            const auto [in, wide, weight] = chunk_offsets(chunk);
            expert_forward(a.received_out + in, a.gate + wide, gated() ? a.up + wide : nullptr, a.glu + wide,
                           a.received + in, w.experts_gate + weight, gated() ? w.experts_up + weight : nullptr,
                           w.experts_down + weight, chunk.rows, Fr);
            pass.poll();
        }
        if (half >= 0) {
            NvtxRange range("moe combine");
            pass.back[half] = issue_exchange(a.received_out, a.expert_out, pass.halves[static_cast<std::size_t>(half)],
                                             true, stats.combine_ms, stats.combine_exposed_ms, stats.combine_bytes,
                                             stats);
        }
    }
    if (pass.plan && !pass.overlapped) {
        NvtxRange range("moe combine");
        exchange(a.received_out, a.expert_out, *pass.plan, true, stats.combine_ms, stats.combine_exposed_ms,
                 stats.combine_bytes, stats);
    }
}

// Shared experts over every token (one expert MLP of width S·Fe; under overlap while the
// combines travel, polled between its matmuls), then the combine adds the routed outputs
// with their weights.
void MoeLayer::combine(float* out, const MoeActivations& a, const float* x, const MoeWeights& w,
                       PassExchanges& pass) {
    const int N = as_int(shape_.tokens), k = as_int(shape_.top_k), C = as_int(shape_.hidden);
    const int SFe = as_int(shape_.shared_experts * shape_.expert_hidden);
    if (SFe > 0) {
        expert_forward(out, a.shared_gate, a.shared_up, a.shared_glu, x, w.shared_gate, w.shared_up, w.shared_down, N,
                       SFe, [&pass] { pass.poll(); });
    } else {
        ops_.fill(out, 0.0f, static_cast<std::size_t>(N) * C);
    }
    for (InFlight& half : pass.back) half.wait();
    if (!tensor_parallel_experts()) {
        ops_.moe_combine(out, a.expert_out, a.routing.slot, a.routing.weights, N, k, C);
    } else {
        // The routed experts' partial outputs, combined, then summed over the etp ranks.
        const std::size_t n = static_cast<std::size_t>(N) * C;
        ops_.fill(expert_tensor_sum_, 0.0f, n);
        ops_.moe_combine(expert_tensor_sum_, a.expert_out, a.routing.slot, a.routing.weights, N, k, C);
        expert_tensor_group_->allreduce(expert_tensor_sum_, expert_tensor_sum_, n, DType::float32, ReduceOp::sum);
        ops_.add_inplace(out, expert_tensor_sum_, n);
    }
}

double MoeLayer::group_aux_loss(const MoeActivations& a, const RoutingCounts& counts) {
    host_.scores.resize(shape_.tokens * shape_.experts);
    ops_.copy_to_host(host_.scores.data(), a.routing.scores, host_.scores.size() * sizeof(float));
    RoutingBuffers scores_on_host;
    scores_on_host.scores = host_.scores.data();
    return balancing_loss(scores_on_host, counts, router_, settings_.aux_loss_coeff);
}

void MoeLayer::backward(float* dx, const MoeGradients& g, const float* dout, const MoeActivations& a, const float* x,
                        const MoeWeights& w, double balance_weight, MoeExchangeStats& stats) {
    combine_backward(dout, a);
    PassExchanges pass(*this);
    const std::vector<ExpertChunk> chunks = expert_chunks();
    send_output_gradients(pass, stats);
    experts_backward(g, a, w, chunks, pass, stats);
    if (pass.overlapped) weight_gradients_in_flight(g, dout, a, x, w, balance_weight, pass);
    input_gradient(dx, g, dout, a, x, w, balance_weight, pass.overlapped);
    poll_partners();  // the model's own ops run next, unpolled
}

void MoeLayer::combine_backward(const float* dout, const MoeActivations& a) {
    const int N = as_int(shape_.tokens), k = as_int(shape_.top_k), C = as_int(shape_.hidden);
    // The combine's backward: d(weight) = dy · FFN(x), d(FFN(x)) = weight · dy.
    ops_.moe_combine_backward(dexpert_out_, dweights_, dout, a.expert_out, a.routing.slot, a.routing.weights, N, k, C);
    // Under --etp the kept outputs are partial, so are their weights' gradients: summed over etp.
    if (tensor_parallel_experts())
        expert_tensor_group_->allreduce(dweights_, dweights_, static_cast<std::size_t>(N) * k, DType::float32,
                                        ReduceOp::sum);
    // The row counts the chunks and the plans (both halves' under overlap) read, on the host first.
    fetch_row_counts(a);
}

// The output gradients to the experts' ranks (the combine's mirror), whole or in two halves.
void MoeLayer::send_output_gradients(PassExchanges& pass, MoeExchangeStats& stats) {
    if (!parallel()) return;
    NvtxRange range("moe combine backward");
    pass.plan = exchange_plan();
    if (!pass.overlapped) {
        exchange(dexpert_out_, dreceived_out_, *pass.plan, false, stats.combine_ms, stats.combine_exposed_ms,
                 stats.combine_bytes, stats);
        return;
    }
    for (int half = 0; half < 2; ++half) {
        pass.halves.push_back(exchange_plan(half));
        pass.out[half] = issue_exchange(dexpert_out_, dreceived_out_, pass.halves.back(), false, stats.combine_ms,
                                        stats.combine_exposed_ms, stats.combine_bytes, stats);
    }
}

// The experts' backward on the rows they ran, the input gradients back (the dispatch's
// mirror); under overlap one half's at a time, as forward.
void MoeLayer::experts_backward(const MoeGradients& g, const MoeActivations& a, const MoeWeights& w,
                                const std::vector<ExpertChunk>& chunks, PassExchanges& pass, MoeExchangeStats& stats) {
    const int C = as_int(shape_.hidden);
    const int Fr = as_int(shape_.routed_hidden());  // a routed expert's width here (Fe/etp)
    // Without ep the experts' rows are the dispatch's own.
    const float* dreceived_out = parallel() ? dreceived_out_ : dexpert_out_;
    float* dreceived = parallel() ? dreceived_ : ddispatched_;
    const int rows_here = chunks.empty() ? 0 : chunks.back().first + chunks.back().rows;
    ops_.fill(dreceived, 0.0f, static_cast<std::size_t>(rows_here) * C);
    for (const int half : pass.runs()) {
        if (half >= 0) pass.out[half].wait();
        for (const ExpertChunk& chunk : chunks) {
            if (chunk.rows == 0 || !in_half(chunk, half)) continue;
            const auto [in, wide, weight] = chunk_offsets(chunk);
            expert_backward(dreceived + in, g.experts_gate + weight, gated() ? g.experts_up + weight : nullptr,
                            g.experts_down + weight, dreceived_out + in, a.gate + wide, gated() ? a.up + wide : nullptr,
                            a.glu + wide, a.received + in, w.experts_gate + weight,
                            gated() ? w.experts_up + weight : nullptr, w.experts_down + weight, chunk.rows, Fr);
            pass.poll();
        }
        if (half >= 0) {
            NvtxRange range("moe dispatch backward");
            pass.back[half] = issue_exchange(dreceived_, ddispatched_, pass.halves[static_cast<std::size_t>(half)],
                                             true, stats.dispatch_ms, stats.dispatch_exposed_ms, stats.dispatch_bytes,
                                             stats);
        }
    }
    if (pass.plan && !pass.overlapped) {
        NvtxRange range("moe dispatch backward");
        exchange(dreceived_, ddispatched_, *pass.plan, true, stats.dispatch_ms, stats.dispatch_exposed_ms,
                 stats.dispatch_bytes, stats);
    }
}

void MoeLayer::router_backward(const MoeActivations& a, double balance_weight) {
    ops_.moe_route_backward(dlogits_, dweights_, a.routing.scores, a.routing.weights, a.routing.chosen,
                            a.routing.routed, balance_weight, as_int(shape_.tokens), as_int(shape_.experts),
                            as_int(shape_.top_k), router_.score);
}

// Under overlap, while the last input gradients travel: the shared experts' backward and
// the router's, all but their input gradients, which input_gradient adds in the blocking order.
void MoeLayer::weight_gradients_in_flight(const MoeGradients& g, const float* dout, const MoeActivations& a,
                                          const float* x, const MoeWeights& w, double balance_weight,
                                          PassExchanges& pass) {
    const int N = as_int(shape_.tokens), C = as_int(shape_.hidden);
    const int SFe = as_int(shape_.shared_experts * shape_.expert_hidden);
    if (SFe > 0)
        expert_backward(nullptr, g.shared_gate, g.shared_up, g.shared_down, dout, a.shared_gate, a.shared_up,
                        a.shared_glu, x, w.shared_gate, w.shared_up, w.shared_down, N, SFe, [&pass] { pass.poll(); });
    router_backward(a, balance_weight);
    ops_.matmul_backward(nullptr, g.router, nullptr, dlogits_, x, w.router, N, C, as_int(shape_.experts));
    // The un-permutation reads ddispatched_, where the halves arrive.
    for (InFlight& half : pass.back) half.wait();
}

void MoeLayer::input_gradient(float* dx, const MoeGradients& g, const float* dout, const MoeActivations& a,
                              const float* x, const MoeWeights& w, double balance_weight, bool overlapped) {
    const int N = as_int(shape_.tokens), k = as_int(shape_.top_k), C = as_int(shape_.hidden);
    const int SFe = as_int(shape_.shared_experts * shape_.expert_hidden);
    // Un-permute: each kept assignment's input gradient back to its token (under --etp the
    // partial ones into a sum over the etp ranks first).
    if (!tensor_parallel_experts()) {
        ops_.moe_dispatch_backward(dx, ddispatched_, a.routing.slot, N, k, C);
    } else {
        const std::size_t n = static_cast<std::size_t>(N) * C;
        ops_.fill(expert_tensor_sum_, 0.0f, n);
        ops_.moe_dispatch_backward(expert_tensor_sum_, ddispatched_, a.routing.slot, N, k, C);
        expert_tensor_group_->allreduce(expert_tensor_sum_, expert_tensor_sum_, n, DType::float32, ReduceOp::sum);
        ops_.add_inplace(dx, expert_tensor_sum_, n);
    }
    if (SFe > 0) {
        if (!overlapped)
            expert_backward(dx, g.shared_gate, g.shared_up, g.shared_down, dout, a.shared_gate, a.shared_up,
                            a.shared_glu, x, w.shared_gate, w.shared_up, w.shared_down, N, SFe);
        else
            expert_input_gradient(dx, x, w.shared_gate, w.shared_up, N, SFe);
    }
    if (!overlapped) router_backward(a, balance_weight);
    ops_.matmul_backward(dx, overlapped ? nullptr : g.router, nullptr, dlogits_, x, w.router, N, C,
                         as_int(shape_.experts));
}

}  // namespace parbench

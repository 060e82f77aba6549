#include "bench/moe_dispatch.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <set>

#include "bench/collective_harness.hpp"
#include "bench/statistics.hpp"
#include "core/counter_rng.hpp"
#include "core/error.hpp"
#include "core/percentile.hpp"
#include "kernels/half_types.hpp"

namespace parbench {
namespace {

using Clock = std::chrono::steady_clock;

double microseconds_since(Clock::time_point start) {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

float token_value(int rank, int token, int h) { return static_cast<float>((7 * rank + 13 * token + 3 * h) % 13 - 6); }
float expert_scale(int expert) { return static_cast<float>(expert % 3 + 1); }

// Element i of a buffer of `type` (a float type) as float, and back.
float load(DType type, const void* base, std::size_t i) {
    switch (type) {
        case DType::bfloat16: return to_float(static_cast<const BFloat16*>(base)[i]);
        case DType::float16: return to_float(static_cast<const Half*>(base)[i]);
        default: return static_cast<const float*>(base)[i];
    }
}

// Rows of `hidden` floats converted into a buffer of `type`, the conversion chosen once per row.
void store_row(DType type, void* base, std::size_t row, const float* values, int hidden) {
    const std::size_t at = row * static_cast<std::size_t>(hidden);
    switch (type) {
        case DType::bfloat16: {
            auto* out = static_cast<BFloat16*>(base) + at;
            for (int h = 0; h < hidden; ++h) out[h] = to_bfloat16(values[h]);
            break;
        }
        case DType::float16: {
            auto* out = static_cast<Half*>(base) + at;
            for (int h = 0; h < hidden; ++h) out[h] = to_half(values[h]);
            break;
        }
        default: std::copy(values, values + hidden, static_cast<float*>(base) + at); break;
    }
}

// The rows one rank exchanges with each peer, in (peer, token) order: which of its tokens go to
// each destination, and which source tokens arrive from each source.
struct Exchange {
    std::vector<std::vector<int>> send_tokens;     // [destination] -> this rank's tokens
    std::vector<std::vector<int>> receive_tokens;  // [source] -> the source's tokens
    std::vector<std::size_t> send_counts, send_offsets, receive_counts, receive_offsets;  // elements
    std::size_t send_rows = 0, receive_rows = 0;
};

Exchange exchange_of(const MoeRouting& routing, int rank, int hidden) {
    Exchange x;
    const auto n = static_cast<std::size_t>(routing.ranks);
    x.send_tokens.resize(n);
    x.receive_tokens.resize(n);
    for (int d = 0; d < routing.ranks; ++d)
        for (int t = 0; t < routing.tokens; ++t) {
            if (routing.sends(rank, t, d)) x.send_tokens[static_cast<std::size_t>(d)].push_back(t);
            if (routing.sends(d, t, rank)) x.receive_tokens[static_cast<std::size_t>(d)].push_back(t);
        }
    std::size_t sent = 0, received = 0;
    for (std::size_t p = 0; p < n; ++p) {
        x.send_offsets.push_back(sent * static_cast<std::size_t>(hidden));
        x.send_counts.push_back(x.send_tokens[p].size() * static_cast<std::size_t>(hidden));
        sent += x.send_tokens[p].size();
        x.receive_offsets.push_back(received * static_cast<std::size_t>(hidden));
        x.receive_counts.push_back(x.receive_tokens[p].size() * static_cast<std::size_t>(hidden));
        received += x.receive_tokens[p].size();
    }
    x.send_rows = sent;
    x.receive_rows = received;
    return x;
}

// One rank's buffers and the phases it times.
class MoeRank {
  public:
    MoeRank(const MoeDispatchConfig& config, const MoeRouting& routing, Communicator& comm)
        : config_(config), routing_(routing), comm_(comm), x_(exchange_of(routing, comm.rank(), config.hidden)) {
        const auto hidden = static_cast<std::size_t>(config.hidden);
        tokens_.resize(static_cast<std::size_t>(config.tokens) * hidden);
        for (int t = 0; t < config.tokens; ++t)
            for (int h = 0; h < config.hidden; ++h) tokens_[t * hidden + h] = token_value(comm.rank(), t, h);
        dispatch_send_.assign(std::max<std::size_t>(1, x_.send_rows * hidden * dtype_size(config.dispatch_type)), 0);
        dispatch_receive_.assign(std::max<std::size_t>(1, x_.receive_rows * hidden * dtype_size(config.dispatch_type)), 0);
        combine_send_.assign(std::max<std::size_t>(1, x_.receive_rows * hidden * dtype_size(config.combine_type)), 0);
        combine_receive_.assign(std::max<std::size_t>(1, x_.send_rows * hidden * dtype_size(config.combine_type)), 0);
        expert_rows_.assign(x_.receive_rows * hidden, 0.0f);
        combined_.assign(tokens_.size(), 0.0f);
        if (config.gemm_expert) {
            identity_.assign(hidden * hidden, 0.0f);
            for (std::size_t h = 0; h < hidden; ++h) identity_[h * hidden + h] = 1.0f;
            gathered_.resize(x_.receive_rows * hidden);
            product_.resize(x_.receive_rows * hidden);
        }
    }

    void dispatch() {
        std::size_t row = 0;
        const auto hidden = static_cast<std::size_t>(config_.hidden);
        for (const std::vector<int>& tokens : x_.send_tokens)
            for (int t : tokens) store_row(config_.dispatch_type, dispatch_send_.data(), row++, &tokens_[t * hidden], config_.hidden);
        comm_.alltoallv(dispatch_send_.data(), x_.send_counts, x_.send_offsets, dispatch_receive_.data(),
                        x_.receive_counts, x_.receive_offsets, config_.dispatch_type);
    }

    // Each received token through this rank's experts it chose, summed: the rows the combine returns.
    void run_experts() {
        const auto hidden = static_cast<std::size_t>(config_.hidden);
        std::fill(expert_rows_.begin(), expert_rows_.end(), 0.0f);
        const int first = comm_.rank() * routing_.experts_per_rank;
        for (int e = first; e < first + routing_.experts_per_rank; ++e) {
            // The rows that chose expert e, in received order.
            std::vector<std::size_t> rows;
            std::size_t row = 0;
            for (int source = 0; source < routing_.ranks; ++source)
                for (int t : x_.receive_tokens[static_cast<std::size_t>(source)]) {
                    for (int i = 0; i < routing_.topk; ++i)
                        if (routing_.at(source, t, i) == e) rows.push_back(row);
                    ++row;
                }
            if (rows.empty()) continue;
            const float scale = expert_scale(e);
            if (!config_.gemm_expert) {
                for (std::size_t r : rows)
                    for (std::size_t h = 0; h < hidden; ++h)
                        expert_rows_[r * hidden + h] += scale * load(config_.dispatch_type, dispatch_receive_.data(), r * hidden + h);
                continue;
            }
            for (std::size_t i = 0; i < rows.size(); ++i)
                for (std::size_t h = 0; h < hidden; ++h)
                    gathered_[i * hidden + h] = load(config_.dispatch_type, dispatch_receive_.data(), rows[i] * hidden + h);
            const int m = static_cast<int>(rows.size()), k = config_.hidden;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, k, scale, gathered_.data(), k, identity_.data(), k,
                        0.0f, product_.data(), k);
            for (std::size_t i = 0; i < rows.size(); ++i)
                for (std::size_t h = 0; h < hidden; ++h) expert_rows_[rows[i] * hidden + h] += product_[i * hidden + h];
        }
    }

    void combine() {
        const auto hidden = static_cast<std::size_t>(config_.hidden);
        for (std::size_t row = 0; row < x_.receive_rows; ++row)
            store_row(config_.combine_type, combine_send_.data(), row, &expert_rows_[row * hidden], config_.hidden);
        comm_.alltoallv(combine_send_.data(), x_.receive_counts, x_.receive_offsets, combine_receive_.data(),
                        x_.send_counts, x_.send_offsets, config_.combine_type);
        std::fill(combined_.begin(), combined_.end(), 0.0f);
        std::size_t row = 0;
        for (const std::vector<int>& tokens : x_.send_tokens)
            for (int t : tokens) {
                float* out = &combined_[t * hidden];
                for (std::size_t h = 0; h < hidden; ++h) out[h] += load(config_.combine_type, combine_receive_.data(), row * hidden + h);
                ++row;
            }
    }

    // Elements of the combined tokens that differ from sum over kept experts of scale x token.
    std::uint64_t count_wrong() const {
        std::uint64_t wrong = 0;
        const int rank = comm_.rank();
        for (int t = 0; t < config_.tokens; ++t) {
            float scale = 0.0f;
            for (int i = 0; i < routing_.topk; ++i)
                if (const int e = routing_.at(rank, t, i); e >= 0) scale += expert_scale(e);
            for (int h = 0; h < config_.hidden; ++h)
                wrong += combined_[static_cast<std::size_t>(t) * config_.hidden + h] != scale * token_value(rank, t, h) ? 1 : 0;
        }
        return wrong;
    }

  private:
    const MoeDispatchConfig& config_;
    const MoeRouting& routing_;
    Communicator& comm_;
    Exchange x_;
    std::vector<float> tokens_;
    std::vector<unsigned char> dispatch_send_, dispatch_receive_, combine_send_, combine_receive_;
    std::vector<float> expert_rows_, combined_, identity_, gathered_, product_;
};

}  // namespace

void check_moe_config(const MoeDispatchConfig& c, int ranks) {
    if (c.tokens < 1 || c.tokens > (1 << 20)) throw UsageError("--tokens must be from 1 to 1048576 per rank");
    if (c.hidden < 1 || c.hidden > (1 << 16)) throw UsageError("--hidden must be from 1 to 65536");
    if (c.experts < 1 || c.experts > (1 << 16)) throw UsageError("--experts must be from 1 to 65536");
    if (c.topk < 1 || c.topk > std::min(c.experts, moe_max_topk))
        throw UsageError("--topk " + std::to_string(c.topk) + ": must be from 1 to the expert count (" +
                         std::to_string(c.experts) + ") and at most " + std::to_string(moe_max_topk) +
                         " (the check's sums stay exact in bfloat16 up to there)");
    if (c.experts % ranks != 0)
        throw UsageError("--experts " + std::to_string(c.experts) + " does not split over " + std::to_string(ranks) +
                         " ranks; give a multiple of " + std::to_string(ranks) + " (every rank holds as many experts)");
    for (const auto& [type, flag] : {std::pair{c.dispatch_type, "--dispatch-dtype"}, std::pair{c.combine_type, "--combine-dtype"}})
        if (type != DType::float32 && type != DType::bfloat16 && type != DType::float16)
            throw UsageError(std::string(flag) + " '" + std::string(dtype_name(type)) + "': use bfloat16, float16 or float32");
    if (c.capacity && !(std::isfinite(*c.capacity) && *c.capacity > 0 && *c.capacity <= 1000))
        throw UsageError("--capacity is a capacity factor above 0 (1.0: each expert takes its even share of the "
                         "selections, e.g. 1.25)");
    if (c.warmup < 0) throw UsageError("--warmup must be 0 or more");
    if (c.iters < 1) throw UsageError("--iters must be at least 1");
    if (auto refusal = skew_refusal(c.skew, c.experts)) throw UsageError(*refusal + " (over the experts)");
}

bool MoeRouting::sends(int r, int t, int d) const {
    for (int i = 0; i < topk; ++i)
        if (const int e = at(r, t, i); e >= 0 && rank_of_expert(e) == d) return true;
    return false;
}

MoeRouting route_moe_tokens(const MoeDispatchConfig& config, int ranks) {
    MoeRouting routing;
    routing.ranks = ranks;
    routing.tokens = config.tokens;
    routing.topk = config.topk;
    routing.experts_per_rank = config.experts / ranks;
    routing.expert.resize(static_cast<std::size_t>(ranks) * config.tokens * config.topk);
    const std::vector<double> weights = destination_weights(config.experts, config.skew);
    std::vector<double> left(weights.size());
    for (int r = 0; r < ranks; ++r)
        for (int t = 0; t < config.tokens; ++t) {
            left = weights;
            double total = 1.0;
            const std::uint64_t stream = static_cast<std::uint64_t>(r) * config.tokens + t;
            for (int i = 0; i < config.topk; ++i) {
                // Weighted draw among the experts not yet chosen (zero-weight experts are never
                // drawn; when only they are left, the lowest-numbered one is taken).
                double target = counter_uniform(config.skew.seed, stream, i) * total;
                int chosen = -1;
                for (std::size_t e = 0; e < left.size(); ++e) {
                    if (left[e] <= 0.0) continue;
                    chosen = static_cast<int>(e);
                    target -= left[e];
                    if (target <= 0.0) break;
                }
                if (chosen < 0) chosen = static_cast<int>(std::find(left.begin(), left.end(), 0.0) - left.begin());
                total -= left[static_cast<std::size_t>(chosen)];
                left[static_cast<std::size_t>(chosen)] = -1.0;  // taken
                routing.expert[(static_cast<std::size_t>(r) * config.tokens + t) * config.topk + i] = chosen;
            }
        }
    if (config.capacity) {
        const auto capacity = static_cast<std::size_t>(
            std::ceil(*config.capacity * ranks * config.tokens * config.topk / static_cast<double>(config.experts)));
        std::vector<std::size_t> taken(static_cast<std::size_t>(config.experts), 0);
        for (int& e : routing.expert) {
            if (taken[static_cast<std::size_t>(e)]++ < capacity) continue;
            e = -1;
            ++routing.dropped;
        }
    }
    return routing;
}

MoePhaseBytes moe_dispatch_bytes(const MoeRouting& routing, int rank, const std::vector<std::string>& hosts,
                                 std::size_t row_bytes) {
    MoePhaseBytes bytes;
    const auto host = [&](int r) { return hosts[static_cast<std::size_t>(r)]; };
    for (int t = 0; t < routing.tokens; ++t) {
        std::set<std::string> token_hosts;
        for (int d = 0; d < routing.ranks; ++d) {
            if (!routing.sends(rank, t, d)) continue;
            (host(d) == host(rank) ? bytes.sent_intra : bytes.sent_inter) += row_bytes;
            if (token_hosts.insert(host(d)).second) {
                bytes.ep_sent += row_bytes;
                if (host(d) != host(rank)) bytes.ep_sent_inter += row_bytes;
            }
        }
        for (int s = 0; s < routing.ranks; ++s) {
            if (!routing.sends(s, t, rank)) continue;
            (host(s) == host(rank) ? bytes.received_intra : bytes.received_inter) += row_bytes;
            bytes.ep_received += row_bytes;  // one (source, token) pair, however many experts here
            if (host(s) != host(rank)) bytes.ep_received_inter += row_bytes;
        }
    }
    return bytes;
}

MoeMeasurement measure_moe_dispatch(const MoeDispatchConfig& config, const MoeRouting& routing, Communicator& comm,
                                    Communicator& control) {
    MoeRank rank(config, routing, comm);
    for (int i = 0; i < config.warmup; ++i) {
        rank.dispatch();
        rank.run_experts();
        rank.combine();
    }
    const auto iters = static_cast<std::size_t>(config.iters);
    std::vector<double> own[2], arrival[2], finish[2], expert;
    for (int phase = 0; phase < 2; ++phase) {
        own[phase].resize(iters);
        arrival[phase].resize(iters);
        finish[phase].resize(iters);
    }
    // One phase as the harness times a call: every rank leaves the barrier at about the same
    // moment (the common time base of arrival and finish), then its own timer around the phase.
    const auto timed = [&](int phase, std::size_t i, auto&& work) {
        comm.barrier();
        const Clock::time_point released = Clock::now();
        arrival[phase][i] = microseconds_since(released);
        const Clock::time_point start = Clock::now();
        work();
        own[phase][i] = microseconds_since(start);
        finish[phase][i] = microseconds_since(released);
    };
    for (std::size_t i = 0; i < iters; ++i) {
        timed(0, i, [&] { rank.dispatch(); });
        const Clock::time_point start = Clock::now();
        rank.run_experts();
        expert.push_back(microseconds_since(start));
        timed(1, i, [&] { rank.combine(); });
    }
    MoeMeasurement measurement;
    measurement.dispatch = gather_rank_times(control, own[0], arrival[0], finish[0]);
    measurement.combine = gather_rank_times(control, own[1], arrival[1], finish[1]);
    double mine = percentile(expert, 0.5);
    measurement.expert_us.resize(static_cast<std::size_t>(control.size()));
    control.allgather(&mine, measurement.expert_us.data(), 1, DType::float64);
    if (config.check) {
        // One more round, then every element of every rank's combined tokens.
        rank.dispatch();
        rank.run_experts();
        rank.combine();
        const std::uint64_t wrong = rank.count_wrong();
        std::uint64_t total = 0;
        control.allreduce(&wrong, &total, 1, DType::uint64, ReduceOp::sum);
        measurement.wrong = total;
    }
    return measurement;
}

}  // namespace parbench

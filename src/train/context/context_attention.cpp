// ContextAttention's front: the names, the positions each rank holds, and the dispatch to the
// style's implementation (ring_attention.cpp, alltoall_attention.cpp).
#include "train/context/context_attention.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "train/context/context_attention_style.hpp"

namespace parbench {

std::string context_style_name(ContextStyle style) {
    switch (style) {
        case ContextStyle::ring: return "ring";
        case ContextStyle::alltoall: return "alltoall";
    }
    throw std::logic_error("context_style_name: unknown style");
}

std::string context_balance_name(ContextBalance balance) {
    switch (balance) {
        case ContextBalance::zigzag: return "zigzag";
        case ContextBalance::none: return "none";
    }
    throw std::logic_error("context_balance_name: unknown balance");
}

namespace detail {

ContextChunks context_chunks(int T, const ContextSplit& split) {
    const int c = split.size;
    if (c < 1) throw UsageError("--cp " + std::to_string(c) + ": the context-parallel size must be at least 1");
    if (split.rank < 0 || split.rank >= c)
        throw std::logic_error("context_chunks: rank " + std::to_string(split.rank) + " outside a group of " +
                               std::to_string(c));
    if (c == 1) return {{0}, T};
    if (split.balance == ContextBalance::none) {
        if (T % c != 0)
            throw UsageError("--cp " + std::to_string(c) + " must divide the sequence length " + std::to_string(T) +
                             "; choose a --cp that divides it");
        return {{split.rank}, T / c};
    }
    if (T % (2 * c) != 0)
        throw UsageError("--cp " + std::to_string(c) + " with --cp-balance zigzag needs 2 x cp = " +
                         std::to_string(2 * c) + " to divide the sequence length " + std::to_string(T) +
                         "; use --cp-balance none or a --cp whose double divides " + std::to_string(T));
    // One chunk from each end of the sequence: chunk r's causal work grows with r and chunk
    // 2c-1-r's shrinks with it, so every rank's pair costs the same (Megatron-core's CP).
    return {{split.rank, 2 * c - 1 - split.rank}, T / (2 * c)};
}

void wait_all(std::span<Request> requests, double& wait_ms) {
    const auto start = std::chrono::steady_clock::now();
    for (Request& request : requests)
        if (request.pending()) request.wait();
    wait_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace detail

std::vector<int> context_positions(int T, const ContextSplit& split) {
    const detail::ContextChunks chunks = detail::context_chunks(T, split);
    std::vector<int> positions;
    positions.reserve(chunks.index.size() * static_cast<std::size_t>(chunks.length));
    for (int chunk : chunks.index)
        for (int i = 0; i < chunks.length; ++i) positions.push_back(chunk * chunks.length + i);
    return positions;
}

struct ContextAttention::State {
    std::unique_ptr<detail::ContextAttentionStyle> style;
};

ContextAttention::ContextAttention(Communicator& cp, Ops& ops, MemoryLedger& ledger, const ContextSplit& split,
                                   const GqaShape& local, int full_seq_len)
    : state_(std::make_unique<State>()) {
    if (cp.size() != split.size || cp.rank() != split.rank)
        throw std::logic_error("ContextAttention: the cp communicator (rank " + std::to_string(cp.rank()) + " of " +
                               std::to_string(cp.size()) + ") is not the split's (rank " +
                               std::to_string(split.rank) + " of " + std::to_string(split.size) + ")");
    detail::context_chunks(full_seq_len, split);  // the UsageErrors of an indivisible sequence first
    if (static_cast<long long>(local.T) * split.size != full_seq_len)
        throw std::logic_error("ContextAttention: " + std::to_string(local.T) + " local tokens x cp " +
                               std::to_string(split.size) + " is not the sequence length " +
                               std::to_string(full_seq_len));
    state_->style = split.style == ContextStyle::ring
                        ? detail::make_ring_attention(cp, ops, ledger, split, local, full_seq_len)
                        : detail::make_alltoall_attention(cp, ops, ledger, split, local, full_seq_len);
}

ContextAttention::~ContextAttention() = default;

std::size_t ContextAttention::saved_floats() const { return state_->style->saved_floats(); }

void ContextAttention::forward(float* out, float* saved, const float* q, const float* k, const float* v) {
    state_->style->forward(out, saved, q, k, v);
}

void ContextAttention::backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                                const float* saved, const float* q, const float* k, const float* v) {
    state_->style->backward(dq, dk, dv, dout, out, saved, q, k, v);
}

const ContextAttentionCounters& ContextAttention::counters() const { return state_->style->counters; }

void ContextAttention::reset_counters() { state_->style->counters = {}; }

}  // namespace parbench

// ContextAttention's front: the dispatch to the style's implementation
// (ring_attention.cpp, alltoall_attention.cpp).
#include "train/context/context_attention.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "train/context/context_attention_style.hpp"

namespace parbench {

namespace detail {

void wait_all(std::span<Request> requests, double& wait_ms) {
    const auto start = std::chrono::steady_clock::now();
    for (Request& request : requests)
        if (request.pending()) request.wait();
    wait_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::vector<ContextChunks> chunks_of_every_rank(int full_seq_len, const ContextSplit& split) {
    std::vector<ContextChunks> chunks;
    for (int rank = 0; rank < split.size; ++rank)
        chunks.push_back(context_chunks(full_seq_len, ContextSplit{rank, split.size, split.style, split.balance}));
    return chunks;
}

}  // namespace detail

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

#include "theory/context_split.hpp"

#include <stdexcept>
#include <string>

#include "core/error.hpp"

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

}  // namespace detail

std::vector<int> context_positions(int T, const ContextSplit& split) {
    const detail::ContextChunks chunks = detail::context_chunks(T, split);
    std::vector<int> positions;
    positions.reserve(chunks.index.size() * static_cast<std::size_t>(chunks.length));
    for (int chunk : chunks.index)
        for (int i = 0; i < chunks.length; ++i) positions.push_back(chunk * chunks.length + i);
    return positions;
}

}  // namespace parbench

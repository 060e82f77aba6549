// How context parallelism splits every sequence over the cp ranks: the style of the attention
// exchange, the balance of the causal work, and which positions a rank holds. The attention
// itself runs in train/context/context_attention.hpp.
#pragma once

#include <string>
#include <vector>

namespace parbench {

enum class ContextStyle { ring, alltoall };
enum class ContextBalance { zigzag, none };

std::string context_style_name(ContextStyle style);      // "ring", "alltoall"
std::string context_balance_name(ContextBalance balance);  // "zigzag", "none"

// This rank's place in its context-parallel group.
struct ContextSplit {
    int rank = 0;
    int size = 1;
    ContextStyle style = ContextStyle::ring;
    ContextBalance balance = ContextBalance::zigzag;
};

// The positions in [0, T) of the full sequence that this rank holds, in its local order
// (T / c of them): balance none, chunk `rank` of c contiguous chunks; zigzag, chunk `rank`
// then chunk 2c-1-rank of 2c chunks. Throws UsageError naming --cp (and --cp-balance) when c
// (or 2c) does not divide T.
std::vector<int> context_positions(int T, const ContextSplit& split);

namespace detail {

// The chunks of the sequence a rank holds: chunk i of the rank's local order covers
// positions [index[i] * length, (index[i] + 1) * length). context_positions() expands it.
struct ContextChunks {
    std::vector<int> index;
    int length = 0;
};
// Throws UsageError as context_positions() documents. One rank (c = 1) holds the whole
// sequence as one chunk, whatever the balance: there is nothing to balance.
ContextChunks context_chunks(int T, const ContextSplit& split);

}  // namespace detail

}  // namespace parbench

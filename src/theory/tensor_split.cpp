#include "theory/tensor_split.hpp"

#include <stdexcept>
#include <string>

namespace parbench {

// The t equal slices of `extent`; the option checks guarantee divisibility.
int split_extent(int extent, const TensorSplit& split) {
    if (extent % split.size != 0)
        throw std::logic_error("tensor parallelism: " + std::to_string(extent) + " does not split " +
                               std::to_string(split.size) + " ways");
    return extent / split.size;
}

std::vector<TensorPiece> column_parallel_rows(int out, int in, const TensorSplit& split) {
    if (split.size == 1) return {};
    const int rows = split_extent(out, split);
    return {TensorPiece{split.rank * rows, 0, rows, in}};
}

std::vector<TensorPiece> row_parallel_columns(int out, int in, const TensorSplit& split) {
    if (split.size == 1) return {};
    const int cols = split_extent(in, split);
    return {TensorPiece{0, split.rank * cols, out, cols}};
}

std::vector<TensorPiece> head_parallel_qkv(int channels, int in, const TensorSplit& split) {
    if (split.size == 1) return {};
    const int rows = split_extent(channels, split);
    std::vector<TensorPiece> pieces;
    for (int part = 0; part < 3; ++part) pieces.push_back(TensorPiece{part * channels + split.rank * rows, 0, rows, in});
    return pieces;
}

std::vector<TensorPiece> column_parallel_rows_by_input_slice(int out, int in, const TensorSplit& split) {
    if (split.size == 1) return {};
    const int rows = split_extent(out, split);
    const int cols = split_extent(in, split);
    std::vector<TensorPiece> pieces;
    for (int q = 0; q < split.size; ++q) pieces.push_back(TensorPiece{split.rank * rows, q * cols, rows, cols});
    return pieces;
}

}  // namespace parbench

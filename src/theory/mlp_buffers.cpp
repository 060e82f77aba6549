#include "theory/mlp_buffers.hpp"

#include <algorithm>

#include "theory/model_layout.hpp"

namespace parbench {

std::size_t MlpBuffers::layer_stores() const {
    std::size_t floats = 0;
    for (const MlpLayerBuffers& layer : layers) floats += layer.pre + layer.post + layer.gathered;
    return floats;
}

MlpBuffers mlp_buffers(const ModelConfig& config, const TensorSplit& split, int batch, int microbatches,
                       Precision precision) {
    const auto b = static_cast<std::size_t>(batch);
    const auto H = static_cast<std::size_t>(config.hidden);
    const std::size_t Hl = H / static_cast<std::size_t>(split.size);
    const bool allgather = split.size > 1 && split.style == TensorParallelStyle::allgather;
    // A row-parallel layer's output is whole (its partial sums all-reduced); a column-parallel
    // one's is this rank's H/t columns.
    auto width = [&](int layer) { return mlp_layout::layer_split(split, layer) == mlp_layout::LinearSplit::row ? H : Hl; };
    const int L = config.layers;
    MlpBuffers buffers;
    buffers.input = b * H;
    buffers.target = b * width(L - 1);
    buffers.loss = b;
    for (int layer = 0; layer < L; ++layer) {
        const bool last = layer + 1 == L;
        MlpLayerBuffers kept;
        kept.pre = b * width(layer);
        if (!last && !allgather) kept.post = b * width(layer);
        if (!last && allgather) kept.gathered = b * H;
        buffers.layers.push_back(kept);
    }
    buffers.dlosses = b;
    buffers.dpre = b * H;
    buffers.dpost = b * H;
    if (allgather) {
        buffers.slice = b * Hl;
        buffers.dgathered = b * H;
    }
    if (mlp_holds_gradient_piece(split.size, precision, microbatches)) {
        buffers.piece_rows = std::min(config.hidden, mlp_gradient_piece_rows);
        buffers.piece = static_cast<std::size_t>(buffers.piece_rows) * H;
    }
    buffers.matmuls = {{batch, config.hidden, config.hidden}};
    return buffers;
}

}  // namespace parbench

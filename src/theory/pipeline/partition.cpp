#include "theory/pipeline/partition.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/error.hpp"

namespace parbench {

std::vector<LayerRange> virtual_stage_layers(int layers, int stages, int virtual_stages,
                                             const std::vector<int>& manual) {
    const int count = stages * virtual_stages;
    const std::string what = "--pp " + std::to_string(stages) +
                             (virtual_stages > 1 ? " x --virtual-stages " + std::to_string(virtual_stages) : "");
    if (count > layers)
        throw UsageError(what + " = " + std::to_string(count) + " stages, but the model has " + std::to_string(layers) +
                         " layers; use at most " + std::to_string(layers) + " stages (or a deeper model)");
    std::vector<int> sizes = manual;
    if (sizes.empty()) {
        if (virtual_stages > 1 && layers % count != 0)
            throw UsageError("--virtual-stages " + std::to_string(virtual_stages) + " does not divide the " +
                             std::to_string(layers) + " layers / --pp " + std::to_string(stages) +
                             " into equal chunks; use a --virtual-stages that divides the layers per stage (or "
                             "--stage-layers)");
        for (int s = 0; s < count; ++s) sizes.push_back(layers / count + (s < layers % count ? 1 : 0));
    } else {
        if (static_cast<int>(sizes.size()) != count)
            throw UsageError("--stage-layers lists " + std::to_string(sizes.size()) + " stages, but " + what + " makes " +
                             std::to_string(count) + "; give one layer count per (virtual) stage");
        for (int size : sizes)
            if (size < 1) throw UsageError("--stage-layers: every stage needs at least 1 layer");
        const int sum = std::accumulate(sizes.begin(), sizes.end(), 0);
        if (sum != layers)
            throw UsageError("--stage-layers sums to " + std::to_string(sum) + " layers, but the model has " +
                             std::to_string(layers) + "; make the counts add up to " + std::to_string(layers));
    }
    std::vector<LayerRange> ranges;
    int first = 0;
    for (int size : sizes) {
        ranges.push_back(LayerRange{first, first + size});
        first += size;
    }
    return ranges;
}

PipelinePart pipeline_part(const Schedule& schedule, int pp_rank, const std::vector<LayerRange>& ranges,
                           P2pMode mode) {
    const int p = schedule.shape.stages;
    PipelinePart part;
    part.split_backward = schedule.split_backward;
    part.slots = peak_in_flight(schedule, mode).at(static_cast<std::size_t>(pp_rank));
    part.occupancy = chunk_occupancy(schedule, mode).at(static_cast<std::size_t>(pp_rank));
    for (int c = 0; c < schedule.shape.virtual_stages; ++c)
        part.chunks.push_back(ranges.at(static_cast<std::size_t>(c * p + pp_rank)));
    return part;
}

ActivationPool activation_pool(const PipelinePart& part, const std::vector<int>& layer_kind) {
    const int layers = static_cast<int>(layer_kind.size());
    const int kinds = layer_kind.empty() ? 0 : *std::max_element(layer_kind.begin(), layer_kind.end()) + 1;
    const std::size_t v = part.chunks.size();
    ActivationPool pool;
    pool.slots = peak_held(part.occupancy, std::vector<int>(v, 1));
    for (int kind = 0; kind < kinds; ++kind) {
        std::vector<int> stores(v, 0);
        for (std::size_t c = 0; c < v; ++c)
            for (int l = part.chunks[c].first; l < part.chunks[c].end; ++l)
                stores[c] += layer_kind.at(static_cast<std::size_t>(l)) == kind;
        pool.layer_stores.push_back(peak_held(part.occupancy, stores));
    }
    std::vector<int> head(v, 0);
    for (std::size_t c = 0; c < v; ++c) head[c] = part.chunks[c].end == layers;
    pool.heads = peak_held(part.occupancy, head);
    return pool;
}

std::vector<int> transformer_layer_store_kinds(const ModelConfig& model, Recompute recompute) {
    std::vector<int> kinds(static_cast<std::size_t>(model.layers), 0);
    if (recompute == Recompute::full || !model.moe) return kinds;
    for (int l = 0; l < model.layers; ++l) kinds[static_cast<std::size_t>(l)] = model.moe->is_moe_layer(l) ? 1 : 0;
    return kinds;
}

int layer_for_store_kind(const ModelConfig& model, const std::vector<int>& layer_kind, int kind) {
    int layer = -1;
    for (int l = 0; l < static_cast<int>(layer_kind.size()); ++l) {
        if (layer_kind[static_cast<std::size_t>(l)] != kind) continue;
        const bool moe = model.moe && model.moe->is_moe_layer(l);
        if (layer < 0 || !moe) layer = l;
        if (!moe) break;
    }
    return layer;
}

}  // namespace parbench

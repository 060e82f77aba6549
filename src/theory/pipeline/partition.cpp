#include "theory/pipeline/partition.hpp"

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
    for (int c = 0; c < schedule.shape.virtual_stages; ++c)
        part.chunks.push_back(ranges.at(static_cast<std::size_t>(c * p + pp_rank)));
    return part;
}

}  // namespace parbench

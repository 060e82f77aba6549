// The depth cut: which layers each virtual stage runs. Balanced by default (the first
// L mod S stages take one layer more: the last stage also runs the head), or as given by
// --stage-layers. Chunk c of pipeline rank r is virtual stage c·p + r.
#pragma once

#include <vector>

#include "theory/model_layout.hpp"
#include "theory/pipeline/schedule.hpp"
#include "theory/pipeline/schedule_simulation.hpp"

namespace parbench {

// Layer ranges of the p·v virtual stages, in order. UsageError naming --pp,
// --virtual-stages or --stage-layers when the layers cannot be cut that way.
std::vector<LayerRange> virtual_stage_layers(int layers, int stages, int virtual_stages,
                                             const std::vector<int>& manual);

// Rank `pp_rank`'s chunks and their activation slots (the schedule's peak in flight in the
// order `mode` issues the actions).
PipelinePart pipeline_part(const Schedule& schedule, int pp_rank, const std::vector<LayerRange>& ranges,
                           P2pMode mode = P2pMode::nonblocking);

}  // namespace parbench

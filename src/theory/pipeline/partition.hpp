// The depth cut: which layers each virtual stage runs. Balanced by default (the first
// L mod S stages take one layer more: the last stage also runs the head), or as given by
// --stage-layers. Chunk c of pipeline rank r is virtual stage c·p + r.
#pragma once

#include <vector>

#include "theory/activation_memory.hpp"
#include "theory/model_config.hpp"
#include "theory/model_layout.hpp"
#include "theory/pipeline/schedule.hpp"
#include "theory/pipeline/schedule_simulation.hpp"

namespace parbench {

// Layer ranges of the p·v virtual stages, in order. UsageError naming --pp,
// --virtual-stages or --stage-layers when the layers cannot be cut that way.
std::vector<LayerRange> virtual_stage_layers(int layers, int stages, int virtual_stages,
                                             const std::vector<int>& manual);

// Rank `pp_rank`'s chunks, their peaks of micro-batches held and the occupancy over the step
// (in the order `mode` issues the actions).
PipelinePart pipeline_part(const Schedule& schedule, int pp_rank, const std::vector<LayerRange>& ranges,
                           P2pMode mode = P2pMode::nonblocking);

// One pipeline rank's kept activations, one pool shared by its chunks. A micro-batch arriving on
// a chunk takes a slot (the chunk's input and its gradient), one layer store per layer of the
// chunk, and on the chunk that ends the model the head's buffers; its backward (W when split)
// gives them back. Each count is the schedule's peak of what the rank holds at once
// (peak_held over part.occupancy), not the sum of every chunk's own peak: the chunks peak at
// different moments. Under Megatron-LM's interleaved 1F1B (arXiv 2104.04473 sec. 2.2) rank r
// runs min((p-r-1)*2 + (v-1)*p, m*v) warm-up forwards and holds one pair more in steady state,
// so rank 0 holds p*v + p - 1 (micro-batch, chunk) pairs of L/(p*v) layers:
// L*(1 + (p-1)/(p*v)) layer stores (arXiv 2205.05198 sec. 4.2.3). parbench's interleaved order
// is Megatron's, and the pool is exactly that count on every rank, where per-chunk pools held
// more whenever m > p (tests/pipeline/schedule_test.cpp, ActivationPoolIsTheRanksPeakHeldAtOnce).
struct ActivationPool {
    int slots = 0;                  // (micro-batch, chunk) pairs held at once
    std::vector<int> layer_stores;  // per kind of layer store (layer_kind): layers held at once
    int heads = 0;                  // micro-batches held at once on the chunk that ends the model
};
// `layer_kind[l]`: the kind of global layer l's store, 0 .. kinds-1 (stores of one kind are
// alike: a dense and an MoE layer keep different buffers); its size is the model's layer count.
ActivationPool activation_pool(const PipelinePart& part, const std::vector<int>& layer_kind);
// The transformers' kinds (train/models/gpt.cpp, llama.cpp): 1 for an MoE layer, 0 for a dense
// one; all 0 under full recompute, where every layer keeps only its output.
std::vector<int> transformer_layer_store_kinds(const ModelConfig& model, Recompute recompute);
// The layer whose store stands for all of `kind`'s (their stores being alike): a dense one where
// the kind has one (under full recompute MoE layers are kind 0 too), so the per-layer figure
// stays a dense layer's; -1 if no layer is of that kind.
int layer_for_store_kind(const ModelConfig& model, const std::vector<int>& layer_kind, int kind);

}  // namespace parbench

// The traffic of one rank per training step on each of its parallel groups, from the layout
// alone: theory/traffic.hpp's formulas, given the part of the model the rank holds. `train`
// puts it beside what its communicators counted on every rank (train/expected_traffic.hpp)
// and `plan` predicts with it, so the two are one formula and the measured match checks both.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "theory/memory.hpp"
#include "theory/traffic.hpp"

namespace parbench {

// The units one micro-batch acquires, in order (forward, then backward): what ZeRO-3 gathers
// (train/schemes/zero.cpp prefetches along the model's own Model::parameter_use_order, which
// this equals for the whole model; tests/plan pins the two together). Per chunk [f, e) of L
// blocks (the whole model is one chunk [0, L)):
//   GPT:   0 (embedding) when f = 0, blocks f+1..e, 0 (final LayerNorm and the tied head,
//          held into backward) when e = L, blocks e..f+1 backward (the embedding's backward
//          needs no weights). The whole model gathers 0 once: the encoder's copy stays held
//          through the blocks for the head (as FSDP's root unit), so no second 0
//   Llama: as a pipelined GPT with its untied head, unit L + 1, in place of the second 0;
//          an MoE layer's routed experts (moe_expert_unit) right after its block, both ways
//   MLP:   0..L-1, then L-2..0 (the last layer stays held into backward; never pipelined)
// A pipelined part's units are numbered as in its own layout (the held units, ascending).
std::vector<int> model_parameter_use_order(const ModelConfig& config, const PipelinePart& part = {});
// The most units held at once along that order (Model::parameter_units_held_at_once): the
// ZeRO-3 gather slots, prefetch aside. 2 for GPT's whole model (the embedding and a block).
int model_parameter_units_held_at_once(const ModelConfig& config, const PipelinePart& part = {});

// By dimension ("dp", "tp", "pp", and "cp" under context parallelism), per step, for the rank
// at pipeline coordinate `pp_rank`, tensor-parallel coordinate `tp_rank` and context-parallel
// coordinate `cp_rank` of the layout; groups of one rank are left out. Under context
// parallelism "dp" is the dp x cp gradient group, tp and pp count the rank's seq / cp tokens,
// and "cp" is the context-parallel attention's transfers (theory/context_parallel.hpp). An MoE
// model's "dp" carries its dense units; under --ep "ep" the MoE layers' exchanges and "edp"
// its routed experts' gradients over the dp x cp / ep ranks holding the same experts
// (train/schemes/expert_split.cpp; without ep they are part of "dp").
// The rank's share of the model is its pipeline chunks (virtual stages c·p + pp_rank); its
// pipeline transfers are b·s·h floats each (b·s/t rows under SP), and GPT's tied embedding,
// when its copies sit on two ranks, adds one exchange of that unit's gradient.
// `whole`: the model's parameter layout under the rank's tensor split, when the caller has it
// (a plan asks for every pipeline rank); built here otherwise.
std::map<std::string, TrafficByOp> engine_rank_traffic(const Layout& layout, int pp_rank, int tp_rank = 0,
                                                       const ParameterLayout* whole = nullptr, int cp_rank = 0);

}  // namespace parbench

// The data-parallel and pipeline traffic of one rank per training step, from the layout alone,
// counted the way Communicator::stats() counts it (nccl-tests' size convention: all-gather
// and reduce-scatter by their whole buffer): which collectives train/schemes/data_parallel.cpp and
// train/schemes/zero.cpp issue per segment of the flat buffer, and which transfers a pipeline rank's
// schedule makes.
//   DDP     all-reduce of every bucket, once per step
//   ZeRO-1  reduce-scatter of every bucket once per step; all-gather of every bucket after AdamW
//   ZeRO-2  reduce-scatter of every bucket per micro-batch; all-gather as ZeRO-1
//   ZeRO-3  reduce-scatter of every layer per micro-batch; all-gather of a layer at every use
//           (forward and backward: 2L+2 for GPT, whose embedding serves encoder and head;
//           2L-1 for the MLP, whose last layer is held into backward)
// A data-parallel group of one issues nothing.
#pragma once

#include <map>
#include <string>

#include "plan/memory.hpp"
#include "train/tensor_parallel_cost.hpp"

namespace parbench {

using Traffic = std::map<std::string, CollectiveVolume>;

Traffic data_parallel_traffic_per_step(const EngineLayout& layout, const EngineRank& rank);

// Point-to-point sends of pipeline rank `pp_rank` per step (activations forward, gradients
// backward: (b·s/t if SP else b·s) x h floats each) and the tied embedding's gradient
// exchange between the first and last stage.
Traffic pipeline_traffic_per_step(const EngineLayout& layout, int pp_rank, const EnginePipeline* pipeline = nullptr);

}  // namespace parbench

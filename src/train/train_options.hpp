// `parbench train` options as a value, and the checks that turn impossible requests into
// one UsageError naming the flags and the fix: first what can be checked before MPI starts,
// then (resolve_train_plan) what needs the world size.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "theory/engine_defaults.hpp"
#include "theory/expert_parallel.hpp"
#include "theory/layout.hpp"
#include "theory/memory.hpp"
#include "theory/model_config.hpp"
#include "theory/pipeline/partition.hpp"
#include "theory/pipeline/schedule.hpp"
#include "theory/pipeline/schedule_simulation.hpp"
#include "train/context/context_attention.hpp"
#include "train/mesh.hpp"
#include "train/model.hpp"
#include "train/schemes/scheme.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {

// The options of a run: what is trained, the layout flags as given (theory/layout.hpp; the
// flags are declared once in cli/layout_flags.cpp), and the run's own options.
struct TrainOptions {
    std::string model = "gpt-tiny";
    std::optional<int> seq;
    LayoutFlags layout;
    int steps = 10;
    int warmup = 3;
    std::uint64_t seed = 1234;
    double lr = 1e-3;
    bool print_schedule = false;      // print the schedule and exit, without MPI
    std::string trace_path;           // Chrome trace of every rank's timeline
    std::optional<double> peak_tflops;
    bool check = false;
    std::string json_path;
    std::string backend = "auto";
    // Testing: world rank that sleeps testing_slow_ms in every step, outside communication
    // (-1: none), so that the straggler report can be shown to name it.
    int testing_slow_rank = -1;
    double testing_slow_ms = 20.0;
    // Testing: world rank that draws the samples after its own (-1: none): a planted data-sharding
    // error, which --check must find (the serial reference draws the right ones).
    int testing_misread_rank = -1;
};

// The options and the layout they resolve to (theory/layout.hpp): before MPI starts without
// the world (dp and what depends on it provisional), after it with every rule checked.
struct TrainPlan {
    TrainOptions options;
    Layout layout;
};

// Throws UsageError; reads the model config (so a bad config fails before MPI starts) and checks
// every rule of the layout that needs no world.
TrainPlan resolve_train_options(const TrainOptions& options);
// The plan for a world of `world_size` ranks whose backend's block attention kernels tile
// (Ops::tiles_block_attention) or not: the layout resolved again from the same flags, now with
// dp and every rule that needs the world (UsageError when the degrees do not fit it or the
// global batch does not split into dp x microbatches; --attention flash where the kernels do
// not tile).
TrainPlan resolve_train_plan(const TrainPlan& plan, int world_size, bool block_attention_tiles = true);
// UsageError for what the backend has not run: --moe-a2a-overlap-1f1b on a GPU, whose paired
// exchange shares one NCCL communicator with the partner pass's blocking collectives.
void check_backend_moe_overlap_1f1b(const TrainPlan& plan, bool gpu);

nlohmann::json to_json(const TrainOptions& options);

}  // namespace parbench

// A data-parallel training scheme: where parameters, gradients and optimizer state live on
// this rank, and which collectives keep the ranks' replicas or shards consistent. The model
// reaches parameters and gradients through the ParameterAccess hooks; the step driver calls
// the rest in order: begin_step, (begin_microbatch, forward, backward) per micro-batch,
// end_backward, optimizer_step. Its communication is counted by the data-parallel
// Communicator (exposed time included); on a group of one rank it issues none.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "device/device.hpp"
#include "theory/parameter_layout.hpp"
#include "theory/scheme_settings.hpp"
#include "train/memory_ledger.hpp"
#include "train/model.hpp"
#include "train/ops/ops.hpp"

namespace parbench {

class TrainingScheme : public ParameterAccess {
  public:
    virtual std::string name() const = 0;  // "ddp", "zero1", "zero2", "zero3"
    // Sets this rank's parameters (full or shard) to the model's seeded initial values.
    virtual void initialize_parameters(std::uint64_t seed) = 0;
    // `step`: AdamW's t of this step (from 1), the same that optimizer_step is given.
    virtual void begin_step(int step) = 0;
    virtual void begin_microbatch(int index) = 0;
    // After the last micro-batch's backward: every gradient reduction has completed.
    virtual void end_backward() = 0;
    // AdamW on what this rank owns (what backward has not updated already: see
    // SchemeSettings::update_in_backward), then whatever makes parameters usable for the next step.
    virtual void optimizer_step(int step) = 0;
    // All parameters in tensor order (FlatLayout::canonical), gathered if sharded.
    // Collective over the data-parallel group; not for timed regions.
    virtual std::vector<float> canonical_parameters() = 0;
    // This rank's share of the step's squared grad norm: the squares of the gradients its
    // updates read, weighed so that the world's shares sum to the model's (gradient_squares.hpp).
    virtual double gradient_square_sum() const = 0;
};

// What one scheme manages: the units of `layout` (which must outlive the scheme), acquired in
// `use_order` with at most `units_held_at_once` held (Model::parameter_use_order and
// parameter_units_held_at_once for the whole model), averaged and sharded over `dp`.
struct SchemeContext {
    Device& device;
    Ops& ops;
    Communicator& dp;
    MemoryLedger& ledger;
    const ParameterLayout& layout;
    std::vector<int> use_order;
    int units_held_at_once = 1;
    // Applied to the averaged gradients before the update: the routed experts' 1/ep
    // (expert_split.cpp says why); 1 for everything else.
    float gradient_scale = 1.0f;
    // Per tensor of `layout`, its weight in the grad norm (1 / the model-parallel ranks holding
    // the same elements; train_run.cpp); empty: every tensor 1.
    std::vector<double> gradient_weights;
};

std::unique_ptr<TrainingScheme> make_data_parallel(const SchemeContext& context, const SchemeSettings& settings);
std::unique_ptr<TrainingScheme> make_zero(const SchemeContext& context, const SchemeSettings& settings);
inline std::unique_ptr<TrainingScheme> make_scheme(const SchemeContext& context, const SchemeSettings& settings) {
    return settings.zero_stage == 0 ? make_data_parallel(context, settings) : make_zero(context, settings);
}

// The model's scheme: one over its whole layout on `gradient_group` (dp x cp), or, for a model
// whose layout has routed-expert units (an MoE model), one over the dense units on
// `gradient_group` and one over the routed experts on `expert_data_group`, the ranks holding
// the same experts (theory/expert_parallel.hpp; the gradient group itself without expert
// parallelism). train/schemes/expert_split.cpp.
// `gradient_weights`: per tensor of the model's layout (SchemeContext::gradient_weights).
std::unique_ptr<TrainingScheme> make_model_scheme(Device& device, Ops& ops, Communicator& gradient_group,
                                                  Communicator& expert_data_group, MemoryLedger& ledger,
                                                  const Model& model, const SchemeSettings& settings,
                                                  const std::vector<double>& gradient_weights = {});

}  // namespace parbench

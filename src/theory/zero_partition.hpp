// ZeRO (Rajbhandari et al., arXiv 1910.02054 sec. 5), written once: which model states a stage
// partitions over the data-parallel group, and how many full-size slots parbench's ZeRO-2/3
// engine (train/schemes/zero.cpp) keeps beside its shards. The planner's byte conventions
// (plan/layout_plan.cpp), the memory theory (theory/memory.cpp), the train report's
// theoretical column and the engine itself read these, so no copy can drift.
#pragma once

namespace parbench {

// Bytes of the three model states; per parameter (a byte convention) or per rank.
struct ModelStates {
    double params = 0.0;
    double grads = 0.0;
    double optimizer = 0.0;
    double total() const { return params + grads + optimizer; }
};

// `parameters` parameters at `bytes_per_parameter`, on one rank of a ZeRO group of `ways`:
// stage 1 divides the optimizer states by the group, stage 2 the gradients too, stage 3 the
// parameters too (sec. 5.1-5.3; Megatron's distributed optimizer is stage 1).
ModelStates zero_partitioned_states(const ModelStates& bytes_per_parameter, double parameters, int zero_stage,
                                    double ways);

// ZeRO-2/3's gradient slots: one for the unit being computed, one for a unit whose gradient
// spans the whole backward (GPT's tied embedding), one more for a reduction in flight
// (--overlap).
inline int zero_gradient_slots(bool overlap) { return 2 + (overlap ? 1 : 0); }

// ZeRO-3's parameter gather slots: the units the model holds at once, one more for the unit
// being prefetched (--prefetch).
inline int zero_gather_slots(int units_held_at_once, bool prefetch) { return units_held_at_once + (prefetch ? 1 : 0); }

}  // namespace parbench

#pragma once

// A byte convention (--states): which bytes a plan counts for a rank's model states, which it
// sends on the wire, and whose form of a scheme it prices. One object per convention holds its
// rules (state_rules), so the planner asks the convention instead of branching on its name:
//
//   zero      the ZeRO paper's mixed-precision Adam (arXiv 1910.02054), run as DeepSpeed runs it
//   megatron  Megatron-LM's bf16 training with fp32 gradients and its distributed optimizer
//   parbench  parbench's own engine: every buffer train allocates and every exchange it makes

#include <optional>
#include <string>

namespace parbench {

enum class StateConvention { zero, megatron, parbench };

// Bytes of model state per parameter, before ZeRO partitions them.
struct PerParameterBytes {
    double params, grads, optimizer;
};

struct StateRules {
    StateConvention convention;
    const char* name;
    // Model states per parameter and the rule's text; none for parbench, whose states are
    // counted per buffer (engine_rank_memory).
    std::optional<PerParameterBytes> per_parameter;
    std::string rule;
    std::string distributed_optimizer_rule;  // appended under ZeRO >= 1
    // Bytes on the wire per fp32 element of train's traffic (theory/rank_traffic.hpp):
    // activations (tp, cp, pp), dp gradients, dp parameter gathers.
    double activation_wire, gradient_wire, parameter_wire;
    // The frameworks' jobs lose the allocator's reserve and the runtime's memory
    // (DeviceSpec::memory_reserved_gib); parbench counts its engine's own buffers.
    bool loses_device_reserve;
    // ZeRO-3 in DeepSpeed's form: under full recompute the recompute forward's release is
    // gathered a third time for the backward (theory/traffic.hpp, deepspeed_recompute_regather).
    bool zero3_regathers_after_recompute;
    // ZeRO-3 as FSDP2's per-parameter sharding: every gathered and reduce-scattered byte copied
    // once on the compute stream (plan/layout_plan.hpp).
    bool zero3_copies_per_parameter;
    // Megatron-LM's pipeline sends across hosts under tp without sp: scattered over the tp ranks'
    // NICs, all-gathered inside the receiving host (arXiv 2104.04473 sec. 4.1).
    bool pp_scatter_gather;
    // The distributed optimizer's parameter all-gather overlapped (--overlap with ZeRO-1) as
    // Megatron-core's --overlap-param-gather runs it: bucket by bucket behind the next step's
    // first forward (plan/layout_comm.hpp, megatron_param_gather_exposed_ms); else after the step.
    bool param_gather_behind_forward;

    std::string rule_text(int zero) const { return zero >= 1 ? rule + distributed_optimizer_rule : rule; }
};

const StateRules& state_rules(StateConvention states);
StateConvention parse_states(const std::string& name);  // UsageError naming --states
std::string states_name(StateConvention states);

}  // namespace parbench

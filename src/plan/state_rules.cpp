#include "plan/state_rules.hpp"

#include <array>

#include "core/error.hpp"

namespace parbench {

namespace {

const std::array<StateRules, 3>& all_state_rules() {
    static const std::array<StateRules, 3> rules{{
        {.convention = StateConvention::zero,
         .name = "zero",
         .per_parameter = PerParameterBytes{2, 2, 12},
         .rule = "ZeRO (arXiv 1910.02054 sec. 3.1): fp16 parameters 2 B + fp16 gradients 2 B + fp32 parameters, "
                 "momentum, variance 12 B = 16 B/param; / dp for the partitioned states",
         .distributed_optimizer_rule = "",
         // fp16 activations, gradients and parameters on the wire.
         .activation_wire = 0.5,
         .gradient_wire = 0.5,
         .parameter_wire = 0.5,
         .loses_device_reserve = true,
         .zero3_regathers_after_recompute = true,
         .zero3_copies_per_parameter = true,
         .pp_scatter_gather = true,
         // DeepSpeed's ZeRO-1/2 all-gather their updated partitions inside the step.
         .param_gather_behind_forward = false},
        {.convention = StateConvention::megatron,
         .name = "megatron",
         .per_parameter = PerParameterBytes{2, 4, 12},
         .rule = "Megatron-LM's theoretical memory: bf16 parameters 2 B + fp32 gradients 4 B + fp32 main parameters "
                 "and Adam 12 B = 18 B/param",
         .distributed_optimizer_rule = "; distributed optimizer: 6 + 12/dp",
         // Reduces fp32 gradients but all-gathers the bf16 parameters (its distributed optimizer,
         // and ZeRO-3/FSDP's param_dtype): 2 bytes, not 4.
         .activation_wire = 0.5,
         .gradient_wire = 1.0,
         .parameter_wire = 0.5,
         .loses_device_reserve = true,
         // Megatron runs ZeRO-3 in FSDP's form, whose recompute uses the backward's gather.
         .zero3_regathers_after_recompute = false,
         .zero3_copies_per_parameter = true,
         .pp_scatter_gather = true,
         // Megatron-core's forward pre-hooks (distributed_data_parallel.py).
         .param_gather_behind_forward = true},
        {.convention = StateConvention::parbench,
         .name = "parbench",
         .per_parameter = std::nullopt,
         .rule = "",
         .distributed_optimizer_rule = "",
         // parbench's engine sends fp32 throughout.
         .activation_wire = 1.0,
         .gradient_wire = 1.0,
         .parameter_wire = 1.0,
         .loses_device_reserve = false,
         .zero3_regathers_after_recompute = false,
         .zero3_copies_per_parameter = false,
         // The engine sends the whole tensor from every tp rank.
         .pp_scatter_gather = false,
         // train's ZeRO-1/2 all-gather each bucket after the update (train/schemes/zero.cpp).
         .param_gather_behind_forward = false},
    }};
    return rules;
}

}  // namespace

const StateRules& state_rules(StateConvention states) {
    for (const StateRules& rules : all_state_rules())
        if (rules.convention == states) return rules;
    throw std::logic_error("state_rules: a convention without rules");
}

StateConvention parse_states(const std::string& name) {
    for (const StateRules& rules : all_state_rules())
        if (name == rules.name) return rules.convention;
    throw UsageError("--states '" + name + "': use zero, megatron or parbench");
}

std::string states_name(StateConvention states) { return state_rules(states).name; }

}  // namespace parbench

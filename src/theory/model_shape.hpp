// A model for `parbench plan` from flags: a config (--model NAME|PATH, as train reads them),
// or --params with shape flags. With --params alone the shape follows the GPT-3 family's
// proportions (Brown et al. 2020, table 2.1: hidden about 128 x layers, 128-wide heads),
// rounded to multiples of 128, and the plan says it chose it.
#pragma once

#include <optional>
#include <string>

#include "theory/model_config.hpp"

namespace parbench {

struct ModelFlags {
    std::string model;            // --model
    std::string params;           // --params "7.5B"
    std::optional<int> layers, hidden, heads, seq, vocab;
};

struct ResolvedModel {
    ModelConfig config;
    std::string source;  // where the shape came from
};

// UsageError naming the flag for contradictions or a shape that does not hold together.
ResolvedModel resolve_plan_model(const ModelFlags& flags);
// "7.5B", "175B", "1.3e9", "350M" -> parameters.
double parse_parameter_count(const std::string& text);

}  // namespace parbench

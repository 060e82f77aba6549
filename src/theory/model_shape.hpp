// A model for `parbench plan` from flags: a config (--model NAME|PATH, as train reads them),
// or --params with shape flags. With --params alone the shape lands within 1 % of the request
// (hidden a multiple of 128, 128-wide heads, near the GPT-3 family's proportions, Brown et al.
// 2020, table 2.1: hidden about 128 x layers), and the plan says what it chose.
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
// "7.5B", "175B", "1.3e9", "350M" -> parameters: finite, from min_parameter_request to
// model_limits::max_parameters, else UsageError naming --params.
inline constexpr double min_parameter_request = 1e7;
double parse_parameter_count(const std::string& text);

// The exact parameter count, without building a per-layer table (any layer count is cheap).
double model_parameter_count(const ModelConfig& config);
// UsageError naming `source` when the model is above model_limits::max_parameters: a run or plan
// is sized from the config before anything is built.
void check_model_size(const ModelConfig& config, const std::string& source);

}  // namespace parbench

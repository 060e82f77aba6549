// The layout flags, declared once for every command that takes a layout (train, plan), each with
// one help text, into theory/layout.hpp's LayoutFlags; resolve_layout checks them. A flag whose
// default differs between the commands (LayoutTarget) says so in its help. tests/layering checks
// that no layout flag is declared anywhere else.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "theory/layout.hpp"

namespace parbench {

// What is laid out: the model config and its sequence length.
void add_model_flags(CLI::App& command, std::string& model, std::optional<int>& seq);
// The degrees, splits, pipeline, batch, scheme, memory and MoE flags train and plan share.
void add_layout_flags(CLI::App& command, LayoutFlags& flags);
// The layout flags of what only parbench's engine runs and plan does not model: the MLP's
// all-gather tensor-parallel style and the MoE routing's capacity and balancing (train only).
void add_engine_layout_flags(CLI::App& command, LayoutFlags& flags);

}  // namespace parbench

// The small MoE model plan's MoE tests work by hand: h 64, 4 heads of 16 (2 key/value heads:
// h_kv 32), f 128, V 32, s 16, 4 layers of which 1, 2 and 3 are MoE: E 4 experts of f_e 32,
// top 2, 1 shared.
#pragma once

#include <nlohmann/json.hpp>

#include "theory/model_config.hpp"

namespace parbench::testing {

inline ModelConfig toy_moe() {
    const nlohmann::json document = {
        {"kind", "llama"}, {"layers", 4},    {"hidden", 64}, {"heads", 4},   {"kv_heads", 2}, {"ffn_hidden", 128},
        {"seq_len", 16},   {"vocab", 32},
        {"moe", {{"experts", 4}, {"top_k", 2}, {"shared_experts", 1}, {"expert_hidden", 32}, {"first_dense", 1}}}};
    return parse_model_config(document, "toy-moe", "toy-moe.json");
}

}  // namespace parbench::testing

// The defaults of parbench's own train that change what a layout holds. `plan --states parbench`
// plans that run, so it takes them from here too: one source, so that a plan and a run given
// the same flags count the same bytes (issue 21 item 10: plan defaulted to bf16 matmuls and a
// global batch of dp x micro-batches, train to fp32 and 8).
#pragma once

namespace parbench {

inline constexpr const char* engine_default_precision = "fp32";
inline constexpr int engine_default_global_batch = 8;  // sequences (or MLP samples) per step

}  // namespace parbench

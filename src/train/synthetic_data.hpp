// Synthetic training data keyed by the global sample index: sample g of a run is the same
// whichever rank, micro-batch or layout draws it, so a parallel run and the serial reference
// see the same global batch at every step.
#pragma once

#include <cstdint>
#include <span>

namespace parbench {

// GPT: sample g is an arithmetic sequence modulo the vocabulary, x[t+1] = x[t] + stride,
// with a random start and a stride in 1..7 drawn from (seed, g): learnable from context,
// so the loss visibly falls. tokens[t] = x[t], targets[t] = x[t+1], t in [0, T).
// tokens and targets hold count * T entries for samples first .. first + count - 1.
void synthetic_tokens(std::uint64_t seed, std::uint64_t first_sample, int count, int seq_len, int vocab,
                      std::span<int> tokens, std::span<int> targets);

// MLP: inputs x ~ N(0, 1) per (seed, g, j); the regression target is sin(x), elementwise.
void synthetic_regression(std::uint64_t seed, std::uint64_t first_sample, int count, int width,
                          std::span<float> inputs, std::span<float> targets);

}  // namespace parbench

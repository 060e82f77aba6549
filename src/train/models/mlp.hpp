// A deep MLP: L linear layers of width h (y = x·Wᵀ + b) with GELU between them, trained
// with mean squared error against a synthetic target. Each layer is a unit.
#pragma once

#include <cstdint>
#include <memory>

#include "train/model.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {

std::unique_ptr<Model> make_mlp_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                      Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp,
                                      Precision precision = Precision::fp32);

}  // namespace parbench

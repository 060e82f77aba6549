// A model as the training engine sees it: its parameters, listed by unit (a layer), and a
// forward and backward pass over one micro-batch that ask a ParameterAccess for each unit's
// parameters and gradient buffer. The parallel scheme implements ParameterAccess (FSDP's
// pre-forward / post-backward hooks, arXiv 2304.11277 sec. 3.3), so the model never knows
// whether a unit is replicated, sharded and gathered on demand, or (later) split by width
// or owned by another pipeline stage.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "device/device.hpp"
#include "train/memory_ledger.hpp"
#include "train/model_config.hpp"
#include "train/ops/ops.hpp"
#include "train/parameter_layout.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {

class ParameterAccess {
  public:
    virtual ~ParameterAccess() = default;
    // The unit's full parameters (layout order), valid until release(unit).
    virtual const float* acquire(int unit) = 0;
    virtual void release(int unit) = 0;
    // The unit's full-size gradient buffer, accumulated into with += by backward ops.
    virtual float* gradients(int unit) = 0;
    // Every contribution of this micro-batch to the unit's gradient has been added.
    virtual void gradients_complete(int unit) = 0;
};

struct MicrobatchShape {
    int batch = 1;        // samples per micro-batch on this rank
    int seq_len = 1;      // tokens per sample (1 for the MLP)
    int microbatches = 1; // per step on this rank
};

class Model {
  public:
    virtual ~Model() = default;
    virtual const ParameterLayout& layout() const = 0;
    // The units in the order one micro-batch acquires them (forward then backward); a
    // scheme that gathers parameters prefetches along it.
    virtual std::vector<int> parameter_use_order() const = 0;
    // Writes the data of global samples [first_sample, first_sample + batch) into the input
    // slot of `microbatch` (untimed: called before the step starts).
    virtual void stage_batch(int microbatch, std::uint64_t first_sample) = 0;
    // Forward to the loss. Leaves the last unit of parameter_use_order's forward part
    // acquired: backward starts with it and releases it.
    virtual void forward(int microbatch, ParameterAccess& access) = 0;
    // `loss_scale` is d(step loss)/d(loss of one row): 1 / (rows of the global batch) when
    // the step loss is the mean over the global batch.
    virtual void backward(int microbatch, float loss_scale, ParameterAccess& access) = 0;
    // Mean loss of a micro-batch's rows (tokens), read back to the host.
    virtual double mean_loss(int microbatch) const = 0;
    // Bytes one layer keeps from forward for backward for one micro-batch on this rank, as
    // allocated from the ledger (the per-layer activation memory of arXiv 2205.05198 sec. 4;
    // the MLP's layers differ under tensor parallelism, so it gives their mean).
    virtual std::size_t activation_bytes_per_layer() const = 0;
};

// Builds the model of the config's kind; every buffer it holds is counted in `ledger`. With
// a tensor-parallel group of more than one rank, this rank's shard of it (tensor_parallel.hpp).
std::unique_ptr<Model> make_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                  Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp = {});

// The parameter list alone (no buffers): for counting parameters before anything runs. With
// a split, the tensors (or pieces of them) that rank split.rank holds.
ParameterLayout model_parameter_layout(const ModelConfig& config, int seq_len, const TensorSplit& split = {});

}  // namespace parbench

// A model as the training engine sees it: its parameters, listed by unit (a layer), and a
// forward and backward pass over one micro-batch that ask a ParameterAccess for each unit's
// parameters and gradient buffer. The parallel scheme implements ParameterAccess (FSDP's
// pre-forward / post-backward hooks, arXiv 2304.11277 sec. 3.3), so the model never knows
// whether a unit is replicated, sharded and gathered on demand, or (later) split by width
// or owned by another pipeline stage.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "theory/activation_memory.hpp"
#include "theory/layer_work.hpp"
#include "theory/model_config.hpp"
#include "theory/model_layout.hpp"
#include "theory/parameter_layout.hpp"
#include "train/context/context_attention.hpp"
#include "train/matmuls.hpp"
#include "train/memory_ledger.hpp"
#include "train/moe/moe_layer.hpp"
#include "train/ops/ops.hpp"
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
    // The optimizer fused with the gradient, piece by piece: true when this micro-batch's
    // contribution is the unit's whole gradient and gradients_complete(unit) would update the
    // unit at once. The model may then, before gradients_complete(unit), hand over complete
    // gradients of adjacent pieces of the unit with update_piece instead of adding them to
    // gradients(unit) (whose elements there stay untouched); gradients_complete updates the rest.
    // A piece is updated at once: the model must be done reading those parameters.
    virtual bool updates_in_pieces(int /*unit*/) const { return false; }
    // Elements [first, first + count) of the unit (layout order) updated with `gradient` (count).
    virtual void update_piece(int unit, std::size_t first, std::size_t count, const float* gradient);
};

struct MicrobatchShape {
    int batch = 1;        // samples per micro-batch on this rank
    int seq_len = 1;      // tokens per sample (1 for the MLP): the whole sequence, even under --cp
    int microbatches = 1; // per step on this rank
};

// Context parallelism (train/context/context_attention.hpp): this rank's cp group and its place
// in it. Of size 1 (the default) it is off and the model runs its own attention. Otherwise the
// model holds the context_positions() of every sequence (seq_len / cp tokens), and its
// attention goes through one ContextAttention shared by its layers.
struct ContextGroup {
    Communicator* comm = nullptr;
    ContextSplit split;
    bool active() const { return split.size > 1; }
};

// Which part of a pipeline chunk's backward to run: all of it, the input gradient only (B),
// or the weight gradients left over from B (W; zero-bubble, arXiv 2401.10241 sec. 2).
enum class BackwardPass { full, input, weight };

// Activation recompute (Korthikanti et al., arXiv 2205.05198 sec. 5; Recompute lives with its
// memory formulas in theory/activation_memory.hpp): none keeps every activation backward needs;
// selective drops the attention core's (the b·a·s² probabilities) and recomputes the scores and
// softmax from the kept Q and K in backward; full keeps only each layer's input (its
// predecessor's output) and reruns the layer's forward before its backward.

class Model {
  public:
    virtual ~Model() = default;
    virtual const ParameterLayout& layout() const = 0;
    // The units in the order one micro-batch acquires them (forward then backward); a
    // scheme that gathers parameters prefetches along it.
    virtual std::vector<int> parameter_use_order() const = 0;
    // The most units held (acquired, not yet released) at once along that order: how many
    // gather slots a scheme that gathers parameters needs, prefetch aside.
    virtual int parameter_units_held_at_once() const { return 1; }
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

    // ---- pipeline chunks (a model built with an active PipelinePart) --------------------
    // Floats of the activation crossing a stage boundary (and of its gradient).
    virtual std::size_t boundary_numel() const;
    // Where chunk `chunk` of `microbatch` takes its input from the previous stage.
    virtual float* boundary_input(int microbatch, int chunk);
    // The chunk's forward output, sent to the next stage.
    virtual const float* boundary_output(int microbatch, int chunk);
    // Where the gradient of the chunk's output arrives; after its backward (full or input
    // pass) it holds the gradient of the chunk's input, sent to the previous stage.
    virtual float* boundary_gradient(int microbatch, int chunk);
    virtual void forward_chunk(int microbatch, int chunk, ParameterAccess& access);
    virtual void backward_chunk(int microbatch, int chunk, float loss_scale, BackwardPass pass,
                                ParameterAccess& access);
    // The unit whose parameters this rank shares with another stage (GPT's tied embedding on
    // the first and last stages), whose gradients the two must add; -1 for none.
    virtual int shared_unit() const;
    // Whether this rank computes the loss (its part ends with the model's head).
    virtual bool computes_loss() const;
    // The context-parallel attention (its counters: attention compute, exposed waits, bytes);
    // null without context parallelism.
    virtual ContextAttention* context_attention();
    // Bytes the context-parallel attention took from the ledger at construction (its
    // workspace, shared by the layers); 0 without context parallelism.
    virtual std::size_t context_workspace_bytes() const;

    // ---- mixture of experts (train/moe/) -----------------------------------------------
    // The balancing losses L_aux of this rank's MoE layers for the micro-batch's last
    // forward, summed (0 without MoE layers or --moe-aux-loss-coeff). The step's objective
    // adds them, each weighted by its group's share of the step, to the loss mean_loss reports.
    virtual double auxiliary_loss(int microbatch) const;
    // After the optimizer: updates the aux-loss-free balancing biases (collective over the
    // balance group when they are on) and returns this rank's MoE layers' figures of the step
    // (one entry per MoE layer it holds, in layer order), starting the next step's from zero.
    virtual std::vector<MoeLayerStats> finish_step();
    // This rank's MoE layers (global indices), in the order finish_step lists them.
    virtual std::vector<int> moe_layers() const;
    // What the ledger gave one MoE layer's kept buffers (per micro-batch) and the MoE scratch,
    // and the shape theory/moe_memory.hpp's formulas take; zeros without MoE layers.
    struct MoeMemory {
        std::size_t kept_bytes = 0, scratch_bytes = 0;
        MoeMemoryShape shape;
    };
    virtual MoeMemory moe_memory() const;
    // --moe-a2a-overlap-1f1b (train/pipeline/pipeline_executor.cpp): each MoE exchange is posted,
    // then `on_post` runs (the partner micro-batch's pass, on a fiber of the same thread), then the
    // exchange is waited for; the model keeps the running pass's state across it. Empty: blocking
    // exchanges. A no-op for models without MoE layers.
    virtual void set_moe_exchange_switch(std::function<void()> on_post);
};

// Builds the model of the config's kind; every buffer it holds is counted in `ledger`. With
// a tensor-parallel group of more than one rank, this rank's shard of it (tensor_parallel.hpp).
// `precision`: the matmuls' (train/matmuls.hpp); parameters and everything else stay fp32.
// `attention`: GPT's and Llama's over a whole sequence without context parallelism
// (theory/engine_attention.hpp: naive, or flash for the block kernels).
std::unique_ptr<Model> make_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                  Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp = {},
                                  const PipelinePart& part = {}, Precision precision = Precision::fp32,
                                  Recompute recompute = Recompute::none, const ContextGroup& cp = {},
                                  const MoeContext& moe = {}, AttentionKind attention = AttentionKind::naive);

}  // namespace parbench

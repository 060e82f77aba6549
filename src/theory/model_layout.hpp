// What a model's parameters are, laid out on ranks: the units and tensors of each model kind
// (GPT, Llama, MLP) in layout order, the pieces a tensor-parallel rank holds
// (theory/tensor_split.hpp), and the units a pipeline rank's chunks hold. The engine builds its
// models on these layouts (train/models/), and the memory and traffic formulas
// (theory/memory.hpp, theory/traffic.hpp) count them, so both see one layout.
#pragma once

#include <vector>

#include "theory/expert_parallel.hpp"
#include "theory/model_config.hpp"
#include "theory/parameter_layout.hpp"
#include "theory/tensor_split.hpp"

namespace parbench {

// The depth cut of one pipeline rank (train/pipeline/): its chunks in order, each a
// contiguous range of layers [first, end) (virtual stage c·p + r for chunk c of rank r), and
// how many micro-batches each chunk holds activations for at once (the schedule's peak).
struct LayerRange {
    int first = 0;
    int end = 0;
};
struct PipelinePart {
    std::vector<LayerRange> chunks;  // empty: the whole model, run by forward / backward
    std::vector<int> slots;          // per chunk: its own peak of micro-batches held
    // The chunks' held micro-batches at each moment one is taken (theory/pipeline/schedule.hpp's
    // ChunkOccupancy): what sizes the pool the chunks share (theory/pipeline/partition.hpp).
    std::vector<std::vector<int>> occupancy;
    bool split_backward = false;     // the schedule runs B (input gradient) and W (weights) apart
    bool active() const { return !chunks.empty(); }
};

// The global units (layout indices of the whole model) that a pipeline part holds, ascending.
std::vector<int> pipeline_part_units(const ModelConfig& config, const PipelinePart& part);
// The parameter list alone (no buffers): for counting parameters before anything runs. With
// a split, the tensors (or pieces of them) that rank split.rank holds.
// With `experts`, the routed experts that rank experts.rank of the expert-parallel group holds.
ParameterLayout model_parameter_layout(const ModelConfig& config, int seq_len, const TensorSplit& split = {},
                                       const ExpertSplit& experts = {});

// Units: 0 the embedding (with the final LayerNorm and the tied output), 1..L the blocks, then
// one unit of routed experts per MoE layer (moe_expert_unit).
ParameterLayout gpt_parameter_layout(const ModelConfig& config, int seq_len, const TensorSplit& split,
                                     const ExpertSplit& experts = {});
// Units: 0 the embedding, 1..L the blocks, L + 1 the head (final RMSNorm and output), then
// one unit of routed experts per MoE layer (moe_expert_unit).
ParameterLayout llama_parameter_layout(const ModelConfig& config, const TensorSplit& split = {},
                                       const ExpertSplit& experts = {});
// The smallest initial scales a config's tensors get, from its sizes alone (no config sets a
// scale): GPT-2's residual projections N(0, 0.02 / sqrt(2 x layers)) (Radford et al. 2019 sec.
// 2.3), which Llama's use too, and the MLP's LeCun N(0, 1 / hidden). Within model_limits both stay
// normal floats (a test holds them at the limits), so no config starts from weights that underflow.
float residual_init_stddev(int layers);
float mlp_init_stddev(int hidden);

// The unit of MoE layer `layer`'s routed experts in the whole model's layout (-1: a dense layer).
int moe_expert_unit(const ModelConfig& config, int layer);
// Whether tensor parallelism of `tp` ranks splits the key/value heads (they divide) or every
// rank holds them all (replicated), docs/training.md's rule.
bool llama_kv_heads_split(const ModelConfig& config, int tp);
ParameterLayout mlp_parameter_layout(const ModelConfig& config, const TensorSplit& split);

// The tensor indices each model kind keeps of its layout (layout order), and the functions
// that add its units and tensors to a layout.
namespace gpt_layout {

// GPT-2's initialisation: N(0, 0.02), the residual projections scaled by 1/sqrt(2L)
// (Radford et al. 2019 sec. 2.3); LayerNorm weight 1, biases 0.
constexpr float init_stddev = 0.02f;

// Tensor indices of one block, in layout order (llm.c's order). An MoE block (ModelConfig::
// Moe::is_moe_layer) has, in place of fcw..fcprojb, the router and shared experts as
// llama_layout's (below; a GELU expert's first matrix in the *_gate slot, no *_up), and its
// routed experts in a unit of their own (moe_expert_unit). Absent: -1.
struct BlockTensors {
    int ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw = -1, fcb = -1, fcprojw = -1, fcprojb = -1;
    int router = -1, experts_gate = -1, experts_up = -1, experts_down = -1;
    int shared_gate = -1, shared_up = -1, shared_down = -1;
};

struct EmbeddingTensors {
    int wte, wpe, lnfw, lnfb;
};

struct Tensors {
    EmbeddingTensors embedding;
    std::vector<BlockTensors> blocks;
};

Tensors build(const ModelConfig& config, int seq_len, const TensorSplit& split, ParameterLayout& layout,
              const ExpertSplit& experts = {});

}  // namespace gpt_layout

namespace llama_layout {

// GPT-2's initialisation, which small Llama reproductions use too: N(0, 0.02), the residual
// projections (Wo, W_down) scaled by 1/sqrt(2L); RMSNorm gains 1.
constexpr float init_stddev = 0.02f;

// A dense block has wgate, wup, wdown; an MoE block (ModelConfig::Moe::is_moe_layer) has
// instead the router (E,C), the E routed experts' SwiGLU matrices stacked expert-major
// (experts_gate, experts_up (E·Fe, C); experts_down (E·C, Fe): expert e's (C,Fe) at row e·C)
// and, with shared experts, their S matrices stacked as one SwiGLU of width S·Fe. Absent: -1.
// Every MoE tensor is held whole by each tensor-parallel rank (the layer runs replicated over
// tp; train/moe/moe_layer.hpp). The routed experts' three tensors form a unit of their own
// (moe_expert_unit, marked UnitSpec::routed_experts), of which an expert-parallel rank holds
// its E/ep experts' rows (ExpertSplit); the router and shared experts stay in the block.
struct BlockTensors {
    int norm1, wq, wk, wv, wo, norm2, wgate = -1, wup = -1, wdown = -1;
    int router = -1, experts_gate = -1, experts_up = -1, experts_down = -1;
    int shared_gate = -1, shared_up = -1, shared_down = -1;
};

struct Tensors {
    int wte = 0;
    std::vector<BlockTensors> blocks;
    int norm_final = 0, wout = 0;
};

Tensors build(const ModelConfig& config, const TensorSplit& split, ParameterLayout& layout,
              const ExpertSplit& experts = {});

}  // namespace llama_layout

namespace mlp_layout {

enum class LinearSplit { column, row };

struct LayerTensors {
    int weight, bias;
};

// How layer l of the model is split under `split`.
LinearSplit layer_split(const TensorSplit& split, int layer);

// allgather style: layers after the first take their input as t rank-major slices.
bool input_in_slices(const TensorSplit& split, int layer);

std::vector<LayerTensors> build(const ModelConfig& config, const TensorSplit& split, ParameterLayout& layout);

}  // namespace mlp_layout

}  // namespace parbench

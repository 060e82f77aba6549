// Activation memory of a transformer layer after Korthikanti et al., "Reducing Activation
// Recomputation in Large Transformer Models" (arXiv 2205.05198), sec. 4 and table 2: 16-bit
// activations, 1-byte dropout masks, s sequence, b micro-batch, h hidden, a heads, t tensor
// parallel ranks:
//   no parallelism          sbh (34 + 5as/h)
//   tensor parallel         sbh (10 + 24/t + 5as/(ht))
//   tensor + sequence par.  sbh (34/t + 5as/(ht))
//   selective recompute     drops the 5as/(ht) attention term (sec. 5)
//   full recompute          2 sbh (the layer's input only, sec. 4.1)
// Context parallelism over c ranks (Megatron-core's CP; ring attention, arXiv 2310.01889;
// DeepSpeed-Ulysses, arXiv 2309.14509) gives each rank s/c tokens of every sequence: with
// s' = s/c every per-token term above takes s', and the attention term 5as/(ht) keeps the
// whole s, since a rank's share of the score matrix is 1/c of it (s/c queries against all s
// keys under ring, a/c heads over the whole sequence under all-to-all): s'bh(34 + 5as/(ht)),
// and so on per row. An online-softmax (flash-style) attention keeps none of it.
// FP8 linear layers (plan --fp8: Transformer Engine's recipe, torchtitan's Float8) keep each
// linear layer's input for its weight gradient as the FP8 cast the forward GEMM read, 1 byte
// where the paper counts 2 (fp8_linear_input_bytes): of the 34, the QKV and first MLP inputs (2
// each, in the replicated 10 under tp) and the projection's and second MLP's inputs (2 and 8, in
// the 24/t) halve: sbh(27), sbh(8 + 19/t), sbh(27/t).
#pragma once

#include <string>

namespace parbench {

// selective_op: torchtitan's op-level selective activation checkpointing (its llama3 configs'
// activation_checkpoint mode "selective", selective_ac_option "op"; torchtitan/parallelisms/
// parallelize_llama.py, _apply_ac_to_transformer_block and _save_list, at the commit of its 2024-12
// H100 benchmark): inside each block the outputs of aten.mm (every other one, counted in forward
// order), of the attention kernel and of the reduce-scatters are saved, and everything else, the
// element-wise ops and the other half of the products among them, is recomputed before the block's
// backward. Priced for dense Llama layers at tp 1 (theory/llama_activation_memory.hpp,
// theory/layer_work.hpp); parbench's engine does not run it.
enum class Recompute { none, selective, full, selective_op };
Recompute parse_recompute(const std::string& name);  // UsageError naming --recompute
std::string recompute_name(Recompute recompute);

struct LayerActivationShape {
    double seq = 0, microbatch = 0, hidden = 0, heads = 0;
    int tp = 1;
    bool sp = false;
    int cp = 1;  // context-parallel ranks: each holds seq / cp tokens
    bool fp8_linear_inputs = false;  // the linear layers' saved inputs as FP8 casts (see above)
};

// Bytes of one saved linear-layer input element under FP8 linear layers (Transformer Engine keeps
// the FP8 copy its forward GEMM read, transformer_engine/pytorch/module/linear.py saving the cast
// input for the weight gradient; torchtitan's Float8 likewise); 16-bit activations take 2.
constexpr double fp8_linear_input_bytes = 1.0;

// Bytes one layer keeps for backward per micro-batch, and the formula used.
double paper_layer_activation_bytes(const LayerActivationShape& shape, Recompute recompute);
std::string paper_layer_activation_formula(bool tensor_parallel, bool sp, Recompute recompute, int cp = 1,
                                          bool fp8_linear_inputs = false);

}  // namespace parbench

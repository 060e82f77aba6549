// Activation memory of one Llama-style layer (RMSNorm, grouped-query attention on rotary
// positions, a SwiGLU MLP; arXiv 2302.13971, 2407.21783) per micro-batch, derived item by item
// the way Korthikanti et al. derive GPT's (arXiv 2205.05198 sec. 4.1): 16-bit activations,
// for each op what its backward needs from its forward, s sequence, b micro-batch, h hidden,
// a query heads, h_kv = g·h/a the key/value width (g key/value heads), f SwiGLU's width, t
// tensor-parallel ranks. Llama trains without dropout, so there are none of GPT's 1-byte masks.
//
//   attention block                                   no parallelism    tensor parallel
//     RMSNorm input                                   2sbh              2sbh
//     q, k, v projections' input (the norm's output)  2sbh              2sbh
//     q after RoPE (input of QKᵀ)                     2sbh              2sbh/t
//     k after RoPE (input of QKᵀ)                     2sb·h_kv          2sb·h_kv'
//     softmax output (its backward, and ·V)           2as²b             2as²b/t
//     v                                               2sb·h_kv          2sb·h_kv'
//     output projection's input                       2sbh              2sbh/t
//   MLP block
//     RMSNorm input                                   2sbh              2sbh
//     gate and up projections' input                  2sbh              2sbh
//     gate output (SiLU's input)                      2sbf              2sbf/t
//     up output (the product's other factor)          2sbf              2sbf/t
//     product silu(gate)·up (down's input)            2sbf              2sbf/t
//
//   no parallelism   sbh·12 + 4sb·h_kv + 6sbf + 2as²b
//   tensor parallel  8sbh + 4sbh/t + 4sb·h_kv' + 6sbf/t + 2as²b/t, with h_kv' = h_kv/t when t
//                    divides g (the key/value heads are split), else h_kv (replicated)
//   + sequence par.  the 8sbh of the norms' region divided by t as well
//   selective        minus the softmax output, 2as²b/t (sec. 5)
//   full recompute   the layer's input only, 2sbh (2sbh/t under SP; sec. 4.1)
//   selective-op     torchtitan's op-level policy (theory/activation_memory.hpp), tp 1: what it
//                    keeps is the block's input and the outputs it saves, not the items above:
//                      block input (the checkpoint's)       2sbh
//                      q projection's output (mm 1 of 7)    2sbh
//                      v projection's output (mm 3)         2sb·h_kv
//                      the attention kernel's output        2sbh
//                      gate projection w1's output (mm 5)   2sbf
//                      down projection w2's output (mm 7)   2sbh
//                    = 8sbh + 2sb·h_kv + 2sbf (the kernel's log-sum-exp rows, 4asb, left out as the
//                    norms' statistics are); the k, output and up projections (mm 2, 4, 6) and
//                    every element-wise op are recomputed. w2's output is kept though nothing
//                    needs it: the policy saves by op, not by use.
//                    While one layer's backward runs, its recompute rebuilds the items above
//                    that it did not keep: the norms' outputs, q and k after RoPE, the MLP
//                    norm's input, up's output and the product, 8sbh + 2sb·h_kv + 4sbf
//                    (llama_op_recompute_rebuilt_bytes).
// RoPE is a fixed rotation, so its backward needs no input: only the rotated q and k are kept.
// Like the paper, the norms' per-row statistics (2sb) are left out. With h_kv = h the attention
// block is the paper's 11sbh + 5as²b less what dropout adds there (the masks, sbh + as²b, and
// the dropped probabilities, 2as²b). parbench's train keeps these items in fp32 (twice these
// bytes, plus the statistics): tests/plan pins the two against its measured ledger.
#pragma once

#include <string>

#include "theory/activation_memory.hpp"
#include "theory/model_config.hpp"

namespace parbench {

struct LayerActivationBytes {
    double bytes = 0.0;
    std::string formula;
};
// fp8_linear_inputs: the four projections' inputs (the two norms' outputs, the output
// projection's input, down's input) at fp8_linear_input_bytes (theory/activation_memory.hpp).
LayerActivationBytes llama_paper_layer_activation_bytes(const ModelConfig& config, int seq_len, int microbatch_size,
                                                        int tp, bool sp, Recompute recompute,
                                                        bool fp8_linear_inputs = false);
// selective-op: the bytes one layer's recompute rebuilds while its backward runs (above), 16-bit, tp 1.
LayerActivationBytes llama_op_recompute_rebuilt_bytes(const ModelConfig& config, int seq_len, int microbatch_size);

}  // namespace parbench

// The buffers a decoder-only transformer (GPT, Llama) allocates around its layers, with their
// sizes (llm.c's size table, as theory/gpt_buffers.hpp and llama_buffers.hpp for a layer's own):
// each micro-batch's tokens, targets and losses, the first layer's input and the backward's
// running gradient (a pipeline slot's pair), the head's (final norm, logits, the loss's parts),
// and the scratch every layer's pass reuses. train/models/transformer_model.hpp allocates
// exactly these and the memory theory (theory/memory.cpp) sums them. Sizes in elements of 4
// bytes (fp32, and the tokens' int32 alike); a buffer sized 0 is one the layout does not take.
#pragma once

#include <cstddef>
#include <vector>

#include "theory/model_config.hpp"
#include "theory/moe_memory.hpp"
#include "theory/precision.hpp"

namespace parbench {

// What the frame's sizes depend on, for one rank.
struct DecoderFrameShape {
    std::size_t rows = 0;           // B·T: this rank's tokens of a micro-batch (T = seq/cp)
    std::size_t residual_rows = 0;  // R: B·T, or B·T/t under SP (the norm and residual regions)
    std::size_t hidden = 0;         // C
    std::size_t vocab_local = 0;    // V/t: this rank's columns of the logits
    std::size_t mlp_local = 0;      // the dense MLP's width on this rank (GPT 4C/t, Llama ffn_hidden/t)
    // The standard attention's (B,NH/t,T,T): its scores and probabilities are full-size
    // scratch; 0 when the attention keeps none (context parallelism, block attention).
    std::size_t scores = 0;
    std::size_t block_norm_tensors = 0;  // a block's norm weights and biases (GPT 4, Llama 2)
    bool norm_keeps_mean = false;        // LayerNorm keeps each row's mean (RMSNorm has none)
    bool sequence_parallel = false;
    // --recompute selective with the standard attention: a layer keeps no probabilities; its
    // backward recomputes them into one set every layer shares (arXiv 2205.05198 sec. 5).
    bool selective_recompute = false;
};

// One micro-batch's, staged before the step (train/models/transformer_parts.hpp MicrobatchTokens).
struct MicrobatchBuffers {
    std::size_t tokens = 0, targets = 0;  // (B,T) int32
    std::size_t losses = 0;               // (B,T) each token's loss
};

// The head's of one micro-batch: the final norm's output and statistics, the logits and the
// vocab-parallel cross-entropy's three row parts (Megatron-LM sec. 3).
struct DecoderHeadBuffers {
    std::size_t norm = 0, mean = 0, rstd = 0;                // (R,C), (R) LayerNorm only, (R)
    std::size_t logits = 0;                                  // (B,T,V/t)
    std::size_t maxes = 0, sums = 0, target_logits = 0;      // (B,T) each
    std::size_t total() const { return norm + mean + rstd + logits + maxes + sums + target_logits; }
};

struct DecoderFrameBuffers {
    MicrobatchBuffers microbatch;  // each micro-batch's
    // The first layer's input (the embedding's output) and the backward's running gradient,
    // (R,C) each: one pair without a pipeline, one per slot of a pipeline's pool.
    std::size_t boundary_input = 0, boundary_gradient = 0;
    DecoderHeadBuffers head;  // one without a pipeline, one per head of a pipeline's pool
    // Forward scratch every layer reuses: the standard attention's pre-softmax scores and a
    // projection's output (B,T,C), before the row-parallel reduction.
    std::size_t preatt = 0, projection = 0;
    // Backward scratch every layer reuses (llm.c's CUDA trainer does the same): the losses' and
    // logits' gradients, a normed input's (B,T,C), the MLP's wide one, the attention's two.
    std::size_t dlosses = 0, dlogits = 0, dnormed = 0, dwide = 0, dpreatt = 0, datt = 0;
    // Under SP: the norms' partial weight gradients summed over tp in one pack
    // (NormGradientPack), the whole (B,T,C) gathers of forward and backward, and the (R,C)
    // chunks the reduce-scatters leave (arXiv 2205.05198 sec. 4.2.2).
    std::size_t norm_pack = 0;
    std::size_t gathered = 0, dgathered = 0, projection_local = 0, dnormed_local = 0;
    // Under selective recompute, the probabilities every layer's backward recomputes into
    // (B,NH/t,T,T); 0 where layers keep their own or the attention keeps none.
    std::size_t shared_probabilities = 0;
};

// The shape of a GPT or Llama rank holding `local_tokens` of each of `batch` sequences (seq/cp)
// at tensor parallelism `tp` (`sp`: sequence-parallel), its attention the standard one
// (probabilities kept) when `standard_attention`, recomputing them when `selective_recompute`. GPT: LayerNorms (weight, bias, mean kept),
// a 4C MLP; Llama: RMSNorms (weight only), an ffn_hidden SwiGLU.
DecoderFrameShape decoder_frame_shape(const ModelConfig& config, int tp, bool sp, std::size_t batch,
                                      std::size_t local_tokens, bool standard_attention, bool selective_recompute);
DecoderFrameBuffers decoder_frame_buffers(const DecoderFrameShape& shape);

// Every matmul a rank runs, which sizes the bf16 operand copies (theory/matmul_buffers.hpp):
// its layers' on `rows` rows (`block`, theory/gpt_buffers.hpp's or llama_buffers.hpp's), the
// logits' (V/t of them at tensor parallelism `tp`) where it computes the head (`holds_head`),
// and an MoE model's experts' (`moe`, null without).
std::vector<MatmulShape> decoder_matmul_shapes(std::vector<MatmulShape> block, const ModelConfig& config, int tp,
                                               std::size_t rows, bool holds_head, const MoeMemoryShape* moe);

}  // namespace parbench

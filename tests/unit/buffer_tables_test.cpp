// theory/transformer_buffers.hpp and theory/moe_buffers.hpp: the size tables the engine
// allocates from and the memory theory sums, counted by hand on toy shapes (the MoE tables
// also against theory/moe_memory.hpp's closed forms, which they replaced).
#include <gtest/gtest.h>

#include "theory/context_attention_buffers.hpp"
#include "theory/gpt_buffers.hpp"
#include "theory/matmul_buffers.hpp"
#include "theory/moe_buffers.hpp"
#include "theory/moe_memory.hpp"
#include "theory/transformer_buffers.hpp"

namespace parbench {
namespace {

// GPT, C 8, 2 heads, V 16, at tp 2 with SP, 1 sequence of 4 tokens: rows 4, R 2, V/t 8, 4C/t 16,
// the standard attention's scores 1·(2/2)·4·4 = 16.
TEST(BufferTables, GptFrameCountedByHand) {
    ModelConfig gpt;
    gpt.kind = ModelKind::gpt;
    gpt.hidden = 8;
    gpt.heads = 2;
    gpt.vocab = 16;
    const DecoderFrameBuffers f = decoder_frame_buffers(decoder_frame_shape(gpt, 2, true, 1, 4, true, false));
    EXPECT_EQ(f.microbatch.tokens + f.microbatch.targets + f.microbatch.losses, 3u * 4);
    EXPECT_EQ(f.boundary_input, 2u * 8);
    EXPECT_EQ(f.boundary_gradient, 2u * 8);
    // final LayerNorm (R,C) 16, its mean and rstd 2 + 2, logits 4·8 = 32, the loss's parts 3·4.
    EXPECT_EQ(f.head.total(), 16u + 4 + 32 + 12);
    EXPECT_EQ(f.preatt, 16u);
    EXPECT_EQ(f.projection + f.dnormed, 2u * 32);
    EXPECT_EQ(f.dlosses + f.dlogits, 4u + 32);
    EXPECT_EQ(f.dwide, 4u * 16);
    EXPECT_EQ(f.dpreatt + f.datt, 2u * 16);
    EXPECT_EQ(f.norm_pack, 4u * 8);  // ln1 and ln2 weights and biases
    EXPECT_EQ(f.gathered + f.dgathered + f.projection_local + f.dnormed_local, 2u * 32 + 2 * 16);
    EXPECT_EQ(f.shared_probabilities, 0u);  // no selective recompute
    // Under selective recompute the layers share one set of probabilities, the scores' size.
    const DecoderFrameBuffers selective = decoder_frame_buffers(decoder_frame_shape(gpt, 2, true, 1, 4, true, true));
    EXPECT_EQ(selective.shared_probabilities, 16u);
}

// Llama (RMSNorm: no mean, weights only), block attention (no scores), no SP: none of those.
TEST(BufferTables, LlamaFrameTakesNoneOfWhatItsLayoutDoesNot) {
    ModelConfig llama;
    llama.kind = ModelKind::llama;
    llama.hidden = 8;
    llama.heads = 2;
    llama.kv_heads = 1;
    llama.vocab = 16;
    llama.ffn_hidden = 12;
    const DecoderFrameBuffers f = decoder_frame_buffers(decoder_frame_shape(llama, 2, false, 1, 4, false, true));
    EXPECT_EQ(f.head.mean, 0u);
    EXPECT_EQ(f.head.total(), 4u * 8 + 4 + 32 + 12);
    EXPECT_EQ(f.dwide, 4u * 6);
    EXPECT_EQ(f.preatt + f.dpreatt + f.datt, 0u);
    EXPECT_EQ(f.shared_probabilities, 0u);  // selective, but block attention keeps no probabilities
    EXPECT_EQ(f.norm_pack + f.gathered + f.dgathered + f.projection_local + f.dnormed_local, 0u);
}

// N 4 tokens, C 3, E 4 experts, k 2, Fe 5, S 1 shared expert.
MoeMemoryShape toy_moe() {
    MoeMemoryShape s;
    s.tokens = 4;
    s.hidden = 3;
    s.experts = 4;
    s.top_k = 2;
    s.expert_hidden = 5;
    s.shared_experts = 1;
    return s;
}

TEST(BufferTables, MoeKeptAndScratchCountedByHand) {
    MoeMemoryShape s = toy_moe();
    // kept: scores 16, chosen/weights/slot 3·8, starts 5, routed 4, dispatch and combine 2·24,
    // gate/up/product 3·(8·5), the shared expert's 3·(4·5).
    EXPECT_EQ(moe_kept_buffers(s).total(), 16u + 24 + 5 + 4 + 48 + 120 + 60);
    // scratch: logits and their gradient 2·16, weights' gradient 8, 2·24, 3·max(40, 20).
    EXPECT_EQ(moe_scratch_buffers(s).total(), 32u + 8 + 48 + 120);
    // pack: router 12, experts 3·(4·5·3), shared 3·(5·3).
    EXPECT_EQ(moe_gradient_pack_buffers(s).total(), 12u + 180 + 45);

    s.ep = 2;  // Re = 2·4·2 = 16 rows received at most; received, received_out (16,3), counts 4
    EXPECT_EQ(moe_kept_buffers(s).total(), 16u + 24 + 5 + 4 + 48 + 3 * 80 + 60 + 96 + 4);
    EXPECT_EQ(moe_scratch_buffers(s).total(), 32u + 8 + 48 + 96 + 3 * 80);

    s.ep = 1;
    s.etp = 5;  // each routed expert's width 1 on this rank; the (N,C) partial sum 12
    EXPECT_EQ(moe_kept_buffers(s).total(), 16u + 24 + 5 + 4 + 48 + 3 * 8 + 60);
    EXPECT_EQ(moe_scratch_buffers(s).total(), 32u + 8 + 48 + 3 * 20 + 12);

    s.etp = 1;
    s.shared_experts = 0;
    s.activation = ExpertActivation::gelu;  // two wide buffers and gradients, no up matrix
    const MoeKeptBuffers gelu = moe_kept_buffers(s);
    EXPECT_EQ(gelu.up + gelu.shared_up + gelu.shared_gate, 0u);
    EXPECT_EQ(gelu.total(), 16u + 24 + 5 + 4 + 48 + 80);
    EXPECT_EQ(moe_scratch_buffers(s).dup, 0u);
    EXPECT_EQ(moe_scratch_buffers(s).total(), 32u + 8 + 48 + 80);
}

// The byte counts are the tables' sums, and equal the closed forms theory/moe_memory.hpp derives.
TEST(BufferTables, MoeByteCountsEqualTheClosedForms) {
    for (std::size_t ep : {1u, 2u})
        for (ExpertActivation activation : {ExpertActivation::swiglu, ExpertActivation::gelu}) {
            MoeMemoryShape s = toy_moe();
            s.ep = ep;
            s.activation = activation;
            const std::size_t N = 4, E = 4, k = 2, C = 3, Fe = 5, R = ep * N * k, w = s.wide_buffers();
            const std::size_t kept = N * E + 3 * N * k + (2 * E + 1) + w * R * Fe + w * N * Fe +
                                     (ep > 1 ? 2 * R * C + E : 0) + 2 * N * k * C;
            const std::size_t scratch = 2 * N * E + N * k + 2 * N * k * C + (ep > 1 ? 2 * R * C : 0) + w * R * Fe;
            EXPECT_EQ(moe_kept_bytes(s), 4 * kept);
            EXPECT_EQ(moe_scratch_bytes(s), 4 * scratch);
            EXPECT_EQ(moe_dispatch_buffer_bytes(s), 4 * 2 * N * k * C);
        }
}

// The bf16 copies hold the largest input, weight and output gradient over the shapes, apart:
// (4,3)·(5,3)ᵀ and (4,5)·(3,5)ᵀ give 20, 15 and 20 elements of 2 bytes; none under fp32.
TEST(BufferTables, Bf16CopiesAreTheLargestOperandsApart) {
    const std::vector<MatmulShape> shapes{{4, 3, 5}, {4, 5, 3}};
    const Bf16OperandBuffers copies = bf16_operand_buffers(Precision::bf16, shapes);
    EXPECT_EQ(copies.input, 20u);
    EXPECT_EQ(copies.weight, 15u);
    EXPECT_EQ(copies.output_gradient, 20u);
    EXPECT_EQ(copies.bytes(), 2u * 55);
    EXPECT_EQ(bf16_operand_buffers(Precision::fp32, shapes).bytes(), 0u);
    // A GPT layer's at tp 2 (C 8, 4C/t 16) on 4 rows, the logits' (V/t 8) added on the head's rank.
    ModelConfig gpt;
    gpt.hidden = 8;
    gpt.heads = 2;
    gpt.vocab = 16;
    const std::vector<MatmulShape> layer = gpt_block_matmul_shapes(gpt, 2, 4, false);
    const Bf16OperandBuffers head = bf16_operand_buffers(Precision::bf16, decoder_matmul_shapes(layer, gpt, 2, 4, true, nullptr));
    EXPECT_EQ(head.input, 4u * 16);             // the MLP's down projection's input (4,16)
    EXPECT_EQ(head.weight, 16u * 8);            // the MLP's (16,8) and (8,16), the logits' (8,8)
    EXPECT_EQ(head.output_gradient, 4u * 16);   // the MLP's up projection's output (4,16)
}

// Context parallelism's attention on a toy rank: 1 sequence, its 4 of 8 tokens (cp 2), 2 heads
// of size 2, each its own key/value head. Ring under zigzag: chunks of 8/(2·2) = 2 tokens.
TEST(BufferTables, ContextAttentionCountedByHand) {
    const GqaShape local{1, 4, 2, 2, 2, 0, 1};
    const ContextSplit ring{0, 2, ContextStyle::ring, ContextBalance::zigzag};
    const RingAttentionBuffers r = ring_attention_buffers(local, ring, 8);
    EXPECT_EQ(r.saved, 1u * 4 * 2);  // a log-sum-exp per query row and head
    // K/V blocks (1·4·2·2 = 16) two of each, partial output 16, four statistics of 8,
    // two 2 x 2 score tiles per head (16), dK/dV parts, two dK and two dV accumulators.
    EXPECT_EQ(r.workspace(), 4u * 16 + 16 + 4 * 8 + 16 + 2 * 16 + 4 * 16);
    // All-to-all: rank 0 takes head 0 over the whole 8 tokens: q, k, v of 1·8·1·2 = 16 each,
    // scores 8·8 = 64; the exchange max(16, 1·4·1·2 x 2) = 16.
    const AlltoallAttentionBuffers a =
        alltoall_attention_buffers(local, ContextSplit{0, 2, ContextStyle::alltoall, ContextBalance::zigzag}, 8);
    EXPECT_EQ(a.saved(), 3u * 16);
    EXPECT_EQ(a.workspace(), 2u * 16 + 3 * 16 + 2 * 16 + 3 * 64);
}

}  // namespace
}  // namespace parbench

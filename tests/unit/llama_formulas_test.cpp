// theory/llama_formulas: parameter counts against the published Llama 3 sizes, and the FLOP
// formula against the GPT formula it must reduce to.
#include <gtest/gtest.h>

#include "theory/llama_formulas.hpp"

namespace parbench {
namespace {

LlamaShape llama3_8b() { return {32, 4096, 32, 8, 14336, 128256}; }
LlamaShape llama3_70b() { return {80, 8192, 64, 8, 28672, 128256}; }

// Meta's model cards give 8,030,261,248 and 70,553,706,496 parameters (the counts of the
// released checkpoints' tensors: untied embedding and output, no biases).
TEST(LlamaFormulas, Llama3ParameterCountsMatchThePublishedOnes) {
    EXPECT_EQ(llama_total_parameters(llama3_8b()), 8030261248LL);
    EXPECT_EQ(llama_total_parameters(llama3_70b()), 70553706496LL);
}

TEST(LlamaFormulas, PartsOfTheCount) {
    const LlamaParameterCount count = llama_parameter_count(llama3_8b());
    EXPECT_EQ(count.embedding, 128256LL * 4096);
    EXPECT_EQ(count.output, count.embedding);  // untied: counted twice
    // GQA: K and V are 4096 x 1024 (8 heads of 128), Q and O 4096 x 4096.
    EXPECT_EQ(count.attention_per_layer, 2LL * 4096 * 4096 + 2LL * 4096 * 1024);
    EXPECT_EQ(count.mlp_per_layer, 3LL * 4096 * 14336);
    EXPECT_EQ(count.norms_per_layer, 2LL * 4096);
    EXPECT_EQ(count.final_norm, 4096);
}

// With as many K/V heads as query heads and f = 4h/1.5 (so 3hf = 12h², the GPT MLP's two
// 4h matrices), the formula is Megatron's 72Bslh²(1 + s/6h + V/12lh).
TEST(LlamaFormulas, FlopsReduceToTheGptFormulaForMhaAndEqualMlpWidth) {
    const double b = 4, s = 512, l = 6, h = 768, v = 50304;
    const LlamaShape shape{6, 768, 12, 12, 2048, 50304};  // 3·768·2048 = 12·768²
    const double gpt = 72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h));
    EXPECT_NEAR(llama_model_flops(shape, b, s) / gpt, 1.0, 1e-12);
}

TEST(LlamaFormulas, GroupedQueryAttentionCountsSmallerKeyValueProjections) {
    LlamaShape mha = llama3_8b();
    mha.kv_heads = mha.heads;
    const double b = 1, s = 8192;
    // 6·B·s·l·2h(h - h_kv) fewer FLOPs with 8 K/V heads than with 32.
    const double saved = 6.0 * b * s * 32 * 2.0 * 4096 * (4096 - 1024);
    EXPECT_NEAR(llama_model_flops(mha, b, s) - llama_model_flops(llama3_8b(), b, s), saved, saved * 1e-12);
    // Roughly 6 N per token plus attention, as the rule of thumb says (N without the embedding).
    const double six_n = 6.0 * s * static_cast<double>(llama_total_parameters(llama3_8b()) - 128256LL * 4096);
    const double attention = 12.0 * 32 * s * s * 4096;
    EXPECT_NEAR(llama_model_flops(llama3_8b(), b, s) / (six_n + attention), 1.0, 1e-3);
}

TEST(LlamaFormulas, RecomputeFlopsAreForwardParts) {
    const LlamaShape shape = llama3_8b();
    const double core = llama_attention_core_forward_flops(shape, 2, 4096);
    EXPECT_DOUBLE_EQ(core, 4.0 * 2 * 32 * 4096.0 * 4096 * 4096);
    EXPECT_GT(llama_layers_forward_flops(shape, 2, 4096), core);
    EXPECT_LT(llama_layers_forward_flops(shape, 2, 4096), llama_model_flops(shape, 2, 4096) / 3.0);
}

}  // namespace
}  // namespace parbench

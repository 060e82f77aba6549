// theory/engine_attention.hpp: which attention train and plan take for a whole sequence, and
// what theory/memory.hpp counts for it.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "theory/engine_attention.hpp"
#include "theory/memory.hpp"

namespace parbench {
namespace {

TEST(EngineAttention, AutoTakesTheBlockKernelsFromTheCrossoverWhereTheyTile) {
    EXPECT_EQ(engine_attention("auto", true, block_attention_min_seq_len - 1, 1), AttentionKind::naive);
    EXPECT_EQ(engine_attention("auto", true, block_attention_min_seq_len, 1), AttentionKind::flash);
    EXPECT_EQ(engine_attention("auto", false, 4096, 1), AttentionKind::naive);  // a GPU keeps the standard one
    EXPECT_EQ(engine_attention("auto", true, 4096, 2), AttentionKind::naive);   // cp: ContextAttention's, not this
    EXPECT_EQ(engine_attention("flash", true, 16, 1), AttentionKind::flash);
    EXPECT_EQ(engine_attention("naive", false, 4096, 1), AttentionKind::naive);
}

TEST(EngineAttention, RefusesWhatCannotRunNamingTheFlag) {
    for (const auto& [name, tiles, cp] : {std::tuple{"fast", true, 1}, std::tuple{"flash", false, 1},
                                          std::tuple{"flash", true, 2}, std::tuple{"naive", true, 2}}) {
        try {
            engine_attention(name, tiles, 512, cp);
            ADD_FAILURE() << name << " accepted";
        } catch (const UsageError& error) {
            EXPECT_NE(std::string(error.what()).find("--attention"), std::string::npos) << error.what();
        }
    }
}

// llama-small's heads at T = 256: the block path keeps B·NH·T floats per layer where the
// standard one keeps B·NH·T² (and three T x T scratch arrays), and adds its workspace once.
TEST(EngineAttention, MemoryCountsTheLogSumExpInPlaceOfTheProbabilities) {
    Layout l;
    l.model = ModelConfig{};
    l.model.name = "test-llama";
    l.model.kind = ModelKind::llama;
    l.model.layers = 3;
    l.model.hidden = 64;
    l.model.heads = 4;
    l.model.kv_heads = 2;
    l.model.ffn_hidden = 160;
    l.model.vocab = 128;
    l.model.seq_len = 256;
    l.seq_len = 256;
    l.microbatch_size = 2;
    for (const Recompute recompute : {Recompute::none, Recompute::selective}) {
        l.recompute = recompute;
        l.attention = AttentionKind::naive;
        const double naive = engine_rank_memory(l, 0).of(MemoryCategory::activations);
        l.attention = AttentionKind::flash;
        const double flash = engine_rank_memory(l, 0).of(MemoryCategory::activations);
        const double probabilities = 2.0 * 4 * 256 * 256, lse = 2.0 * 4 * 256;
        const SequenceAttentionFloats block = sequence_attention_floats(GqaShape{2, 256, 4, 2, 16, 0, 2});
        // none: every layer's probabilities; selective: one shared set. Both: 3 scratch arrays.
        const double kept = recompute == Recompute::none ? 3 * probabilities : probabilities;
        EXPECT_DOUBLE_EQ(naive - flash,
                         4.0 * (kept + 3 * probabilities - 3 * lse - static_cast<double>(block.workspace)));
    }
}

}  // namespace
}  // namespace parbench

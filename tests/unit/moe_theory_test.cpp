// theory/moe.hpp: parameter counts by hand on a toy shape and against the published totals of
// the two presets, the all-to-all bytes of expert parallelism, expert states under ZeRO, and
// the config's "moe"/"mla" keys and their refusals.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "theory/model_config.hpp"
#include "theory/model_layout.hpp"
#include "theory/moe.hpp"
#include "theory/zero_partition.hpp"

namespace parbench {
namespace {

// h 4, 2 heads (MHA), V 5, dense f 8, 3 layers of which the last 2 are MoE with E 3, k 1, S 1, f_e 2.
TEST(MoeTheory, ToyShapeCountedByHand) {
    MoeShape shape;
    shape.dense = {3, 4, 2, 2, 8, 5};
    shape.moe_layers = 2;
    shape.experts = 3;
    shape.top_k = 1;
    shape.shared_experts = 1;
    shape.expert_hidden = 2;
    // outside: embedding 20 + output 20 + final norm 4 = 44; attention 4 h^2 = 64; norms 8.
    // dense layer: 64 + 3*4*8 + 8 = 168. MoE layer: 64 + 8 + router 12 + experts (3+1) * 24 = 180.
    // active MoE layer: 64 + 8 + 12 + (1+1) * 24 = 132.
    const MoeParameterCount count = moe_parameter_count(shape);
    EXPECT_EQ(count.total, 44 + 168 + 2 * 180);
    EXPECT_EQ(count.active, 44 + 168 + 2 * 132);
    EXPECT_EQ(count.routed_experts, 2 * 3 * 24);
}

TEST(MoeTheory, LatentAttentionCountedByHand) {
    // h 10, 2 heads, q_lora 3, kv_lora 2, nope 4, rope 1, v 5:
    // queries 30 + 3 + 3*2*5 = 63; keys/values 10*3 + 2 + 2*2*9 = 68; output 2*5*10 = 100.
    EXPECT_EQ(latent_attention_parameters(10, 2, {3, 2, 4, 1, 5}), 63 + 68 + 100);
}

// The presets against the published counts. Mixtral 8x7B: 46.7B total, 12.9B active
// (arXiv 2401.04088 sec. 2). DeepSeek-V3: 671B total, 37B active (arXiv 2412.19437 abstract),
// the 14B multi-token-prediction module excluded as the paper's 671B does.
TEST(MoeTheory, PresetsMatchPublishedCounts) {
    const ModelConfig mixtral = load_model_config("mixtral-8x7b");
    ASSERT_TRUE(mixtral.moe);
    EXPECT_EQ(mixtral.moe_layer_count(), 32);
    const MoeParameterCount m = moe_parameter_count(moe_shape(mixtral));
    EXPECT_NEAR(m.total / 1e9, 46.7, 46.7 * 0.005) << m.total;
    EXPECT_NEAR(m.active / 1e9, 12.9, 12.9 * 0.01) << m.active;

    const ModelConfig deepseek = load_model_config("deepseek-v3");
    ASSERT_TRUE(deepseek.moe && deepseek.mla);
    EXPECT_EQ(deepseek.moe_layer_count(), 58);
    const MoeParameterCount d = moe_parameter_count(moe_shape(deepseek));
    EXPECT_NEAR(d.total / 1e9, 671.0, 671.0 * 0.005) << d.total;
    // 37B is the paper's rounding; the count with embedding and output is 37.5B.
    EXPECT_NEAR(d.active / 1e9, 37.0, 37.0 * 0.02) << d.active;
    std::cout << "mixtral-8x7b total " << m.total << " active " << m.active << "; deepseek-v3 total " << d.total
              << " active " << d.active << '\n';
}

TEST(MoeTheory, AlltoallBytesPerLayer) {
    // 4096 tokens of h 4096 in bf16, top 2, over 8 ranks: 7/8 of the 2 copies leave the rank.
    EXPECT_DOUBLE_EQ(moe_alltoall_bytes(4096, 4096, 2, 8, 2, 1.0), 4096.0 * 4096 * 2 * 7 / 8 * 2);
    EXPECT_DOUBLE_EQ(moe_alltoall_bytes(4096, 4096, 2, 8, 2, 1.5), 1.5 * moe_alltoall_bytes(4096, 4096, 2, 8, 2, 1.0));
    EXPECT_DOUBLE_EQ(moe_alltoall_bytes(4096, 4096, 2, 1, 2, 1.0), 0.0);  // one rank holds every expert
}

TEST(MoeTheory, ExpertStatesShardedByEpAndZero) {
    // ZeRO's 2 + 2 + 12 B per parameter; 8e9 routed parameters over ep 8, ZeRO over 4 ranks.
    const ModelStates bytes{2, 2, 12};
    const double local = 8e9 / 8;
    EXPECT_DOUBLE_EQ(zero_partitioned_states(bytes, local, 0, 4).total(), 1e9 * 16);
    EXPECT_DOUBLE_EQ(zero_partitioned_states(bytes, local, 1, 4).total(), 1e9 * (2 + 2 + 12.0 / 4));
    EXPECT_DOUBLE_EQ(zero_partitioned_states(bytes, local, 2, 4).total(), 1e9 * (2 + 2.0 / 4 + 12.0 / 4));
    EXPECT_DOUBLE_EQ(zero_partitioned_states(bytes, local, 3, 4).total(), 1e9 * 16 / 4);
}

nlohmann::json llama_with(const nlohmann::json& extra) {
    nlohmann::json document = {{"kind", "llama"}, {"layers", 6},   {"hidden", 64},  {"heads", 4},
                               {"kv_heads", 2},   {"ffn_hidden", 128}, {"seq_len", 16}, {"vocab", 32}};
    if (extra.is_object()) document.update(extra);  // {} converts to null
    return document;
}

TEST(MoeTheory, ConfigKeysAndRefusals) {
    const ModelConfig every_other =
        parse_model_config(llama_with({{"moe", {{"experts", 4}, {"top_k", 2}, {"expert_hidden", 32}, {"every", 2},
                                                 {"first_dense", 1}}}}),
                           "t", "t.json");
    EXPECT_EQ(every_other.moe_layer_count(), 3);  // layers 1, 3 and 5
    EXPECT_EQ(parse_model_config(llama_with({}), "t", "t.json").moe_layer_count(), 0);
    const auto refused = [](const nlohmann::json& document, const std::string& needle) {
        try {
            parse_model_config(document, "t", "t.json");
            ADD_FAILURE() << "accepted " << document.dump();
        } catch (const UsageError& error) {
            EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
        }
    };
    refused(llama_with({{"moe", {{"experts", 4}, {"top_k", 5}, {"expert_hidden", 32}}}}), "\"moe.top_k\" (5) is above");
    refused(llama_with({{"moe", {{"experts", 4}, {"top_k", 1}, {"expert_hidden", 32}, {"expert", 1}}}}),
            "\"moe.expert\" is not a known key");
    refused(llama_with({{"moe", {{"experts", 4}, {"top_k", 1}}}}), "\"moe.expert_hidden\" is missing");
    refused(llama_with({{"moe", {{"experts", 4}, {"top_k", 1}, {"expert_hidden", 32}, {"first_dense", 6}}}}),
            "leaves no MoE layer");
    refused(llama_with({{"moe", {{"experts", 4}, {"top_k", 1}, {"expert_hidden", 32}, {"shared_experts", -1}}}}),
            "\"moe.shared_experts\" must be an integer from 0");
    refused(llama_with({{"mla", {{"q_lora_rank", 8}}}}), "\"mla.kv_lora_rank\" is missing");
    refused(llama_with({{"moe", {{"experts", 4}, {"top_k", 1}, {"expert_hidden", 32}, {"expert_activation", "relu"}}}}),
            "\"moe.expert_activation\" is \"relu\"");
    nlohmann::json mlp = {{"kind", "mlp"}, {"layers", 2}, {"hidden", 64}, {"moe", {{"experts", 2}}}};
    refused(mlp, "unknown key \"moe\" for a mlp model");
    // Each family's own MLP form is its experts' default; the key overrides it.
    EXPECT_EQ(every_other.moe->activation, ExpertActivation::swiglu);
    nlohmann::json gpt = {{"kind", "gpt"}, {"layers", 2}, {"hidden", 64}, {"heads", 4}, {"seq_len", 16},
                          {"vocab", 32},   {"moe", {{"experts", 2}, {"top_k", 1}, {"expert_hidden", 8}}}};
    EXPECT_EQ(parse_model_config(gpt, "g", "g.json").moe->activation, ExpertActivation::gelu);
    gpt["moe"]["expert_activation"] = "swiglu";
    EXPECT_EQ(parse_model_config(gpt, "g", "g.json").moe->matrices_per_expert(), 3);
}

// gpt-moe-tiny (h 32, s 16, V 128, 2 layers: layer 0 dense, layer 1 MoE with E 4, k 2, S 1,
// f_e 64, GELU experts without biases) by hand:
//   embedding 128·32 + 16·32 + final LayerNorm 2·32                      = 4672
//   dense layer: LayerNorms 128, attention 3·32² + 96 + 32² + 32 = 4224, MLP 8·32² + 5·32 = 8352
//                                                                          = 12704
//   MoE layer: 128 + 4224 + router 32·4 + (4 + 1) experts of 2·32·64 = 4096 = 24960
// total 42336; active: 2 routed experts fewer, 42336 - 2·4096 = 34144.
TEST(MoeTheory, GptMoeCountedByHandAndEqualToTheLayout) {
    const ModelConfig tiny = load_model_config("gpt-moe-tiny");
    const MoeParameterCount count = moe_parameter_count(tiny);
    EXPECT_EQ(count.total, 42336);
    EXPECT_EQ(count.active, 34144);
    EXPECT_EQ(count.routed_experts, 4 * 4096);
    for (const char* name : {"gpt-moe-tiny", "gpt-moe-small"}) {
        const ModelConfig config = load_model_config(name);
        const ParameterLayout layout = model_parameter_layout(config, config.seq_len);
        EXPECT_EQ(static_cast<std::size_t>(moe_parameter_count(config).total), layout.total_numel()) << name;
        // The routed experts are the layout's expert units, whole.
        std::size_t routed = 0;
        for (int unit : layout.routed_expert_units()) routed += layout.units().at(static_cast<std::size_t>(unit)).numel;
        EXPECT_EQ(static_cast<std::size_t>(moe_parameter_count(config).routed_experts), routed) << name;
    }
}

}  // namespace
}  // namespace parbench

namespace parbench {
namespace {

// theory/moe.hpp's MoE-layer formulas by hand: T 10 tokens, h 8, E 4, k 2, S 1, f_e 6, t 2.
TEST(MoeTheory, LayerActivationsAndFlopsByHand) {
    MoeActivationShape shape;
    shape.tokens = 10;
    shape.hidden = 8;
    shape.experts = 4;
    shape.top_k = 2;
    shape.shared_experts = 1;
    shape.expert_hidden = 6;
    shape.tp = 2;
    // 4·10·4 + 2·20·8 + 6·(20 + 10)·6/2 + 2·10·2·8 = 160 + 320 + 540 + 320
    EXPECT_DOUBLE_EQ(moe_mlp_activation_bytes(shape), 1340.0);
    shape.imbalance = 1.5;  // 30 copies received: 2·30·8 = 480, 6·(30 + 10)·6/2 = 720
    EXPECT_DOUBLE_EQ(moe_mlp_activation_bytes(shape), 160.0 + 480 + 720 + 320);
    // Router 2·8·4 = 64, (2 + 1) experts of 2·3·8·6 = 288 each.
    EXPECT_DOUBLE_EQ(moe_mlp_forward_flops_per_token(8, 4, 2, 1, 6), 64.0 + 3 * 288);
    // The busiest receiver's buffer: 10 tokens x 8 x top 2 x 2 B x 1.5.
    EXPECT_DOUBLE_EQ(moe_alltoall_buffer_bytes(10, 8, 2, 2, 1.5), 480.0);
}

}  // namespace
}  // namespace parbench

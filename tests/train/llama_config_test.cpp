// kind: llama configs: parsing, refusals, and the shipped shapes against the published sizes.
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "plan/llama_formulas.hpp"
#include "tests/support/usage_error_text.hpp"
#include "train/metrics.hpp"
#include "train/model_config.hpp"

namespace parbench {
namespace {

using parbench::testing::usage_error_text;

nlohmann::json tiny_llama_json() {
    return {{"kind", "llama"}, {"layers", 2},  {"hidden", 16}, {"heads", 4},         {"kv_heads", 2},
            {"ffn_hidden", 40}, {"seq_len", 8}, {"vocab", 32},  {"rope_theta", 5e5}};
}

TEST(LlamaConfig, Parses) {
    const ModelConfig config = parse_model_config(tiny_llama_json(), "t", "t.json");
    EXPECT_EQ(config.kind, ModelKind::llama);
    EXPECT_EQ(model_kind_name(config.kind), "llama");
    EXPECT_TRUE(config.has_sequence());
    EXPECT_EQ(config.kv_heads, 2);
    EXPECT_EQ(config.ffn_hidden, 40);
    EXPECT_DOUBLE_EQ(config.rope_theta, 5e5);
    EXPECT_DOUBLE_EQ(config.norm_eps, 1e-5);  // the default when absent
    const nlohmann::json shape = to_json(config).at("shape");
    EXPECT_EQ(shape.at("kv_heads"), 2);
    EXPECT_EQ(shape.at("ffn_hidden"), 40);
}

TEST(LlamaConfig, BadShapesAreNamed) {
    nlohmann::json kv = tiny_llama_json();
    kv["kv_heads"] = 3;
    std::string message = usage_error_text([&] { parse_model_config(kv, "t", "t.json"); });
    EXPECT_NE(message.find("\"kv_heads\""), std::string::npos) << message;
    nlohmann::json missing = tiny_llama_json();
    missing.erase("ffn_hidden");
    message = usage_error_text([&] { parse_model_config(missing, "t", "t.json"); });
    EXPECT_NE(message.find("\"ffn_hidden\""), std::string::npos) << message;
    nlohmann::json theta = tiny_llama_json();
    theta["rope_theta"] = -1;
    message = usage_error_text([&] { parse_model_config(theta, "t", "t.json"); });
    EXPECT_NE(message.find("\"rope_theta\""), std::string::npos) << message;
    nlohmann::json odd_head = tiny_llama_json();  // head size 16/16 = 1: rotary needs pairs
    odd_head["heads"] = 16;
    odd_head["kv_heads"] = 16;
    message = usage_error_text([&] { parse_model_config(odd_head, "t", "t.json"); });
    EXPECT_NE(message.find("even"), std::string::npos) << message;
    // GPT configs do not take Llama keys.
    const nlohmann::json gpt = {{"kind", "gpt"}, {"layers", 2}, {"hidden", 16}, {"heads", 4},
                                {"seq_len", 8},  {"vocab", 32}, {"kv_heads", 2}};
    message = usage_error_text([&] { parse_model_config(gpt, "g", "g.json"); });
    EXPECT_NE(message.find("\"kv_heads\""), std::string::npos) << message;
}

TEST(LlamaConfig, ShippedShapesHaveThePublishedParameterCounts) {
    for (const char* name : {"llama-tiny", "llama-small", "llama3-8b", "llama3-70b"})
        EXPECT_EQ(load_model_config(name).kind, ModelKind::llama) << name;
    EXPECT_EQ(llama_total_parameters(llama_shape(load_model_config("llama3-8b"))), 8030261248LL);
    EXPECT_EQ(llama_total_parameters(llama_shape(load_model_config("llama3-70b"))), 70553706496LL);
    const ModelConfig eight_b = load_model_config("llama3-8b");
    EXPECT_DOUBLE_EQ(eight_b.rope_theta, 500000.0);
    EXPECT_EQ(eight_b.vocab, 128256);
}

TEST(LlamaConfig, ModelFlopsUseTheLlamaFormula) {
    const ModelConfig config = load_model_config("llama3-8b");
    EXPECT_DOUBLE_EQ(model_flops_per_step(config, 4, 2048), llama_model_flops(llama_shape(config), 4, 2048));
    EXPECT_NE(flops_formula(config).find("3h*f"), std::string::npos);
}

}  // namespace
}  // namespace parbench

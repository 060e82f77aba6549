// kind: llama configs: parsing, refusals, and the shipped shapes against the published sizes.
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "tests/support/usage_error_text.hpp"
#include "theory/llama_formulas.hpp"
#include "theory/model_config.hpp"
#include "theory/tensor_parallel_cost.hpp"
#include "train/metrics.hpp"
#include "train/model.hpp"
#include "train/models/llama.hpp"

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

// The model's own tensor list counts what the formula counts.
TEST(LlamaConfig, ModelLayoutHasTheFormulasParameterCount) {
    for (const char* name : {"llama-tiny", "llama-small", "llama3-8b", "llama3-70b"}) {
        const ModelConfig config = load_model_config(name);
        const ParameterLayout layout = model_parameter_layout(config, config.seq_len);
        EXPECT_EQ(static_cast<std::int64_t>(layout.total_numel()), llama_total_parameters(llama_shape(config))) << name;
        EXPECT_EQ(layout.units().size(), static_cast<std::size_t>(config.layers) + 2) << name;  // embedding, blocks, head
    }
}

// K/V heads split over tp when it divides them, else every rank holds them whole: the shards'
// sizes say which.
TEST(LlamaConfig, KeyValueHeadsSplitOrReplicatedUnderTensorParallelism) {
    const ModelConfig config = load_model_config("llama-tiny");  // 4 heads, 2 kv heads, head size 16
    EXPECT_TRUE(llama_kv_heads_split(config, 2));
    EXPECT_FALSE(llama_kv_heads_split(config, 4));
    auto wk_numel = [&](int tp) {
        const ParameterLayout layout = llama_parameter_layout(config, TensorSplit{0, tp});
        for (const TensorSpec& tensor : layout.tensors())
            if (tensor.name == "h0.wk") return tensor.numel;
        return std::size_t{0};
    };
    EXPECT_EQ(wk_numel(1), 32u * 64u);
    EXPECT_EQ(wk_numel(2), 16u * 64u);
    EXPECT_EQ(wk_numel(4), 32u * 64u);  // replicated
}

}  // namespace
}  // namespace parbench

namespace parbench {
namespace {

// Full recompute adds one forward of the layers: for GPT, Megatron's 96 instead of 72 in the
// layer terms (arXiv 2104.04473 sec. 5.1, eq. 3 with and without recompute).
TEST(RecomputeFormulas, FullRecomputeIsMegatronsNinetySix) {
    const ModelConfig gpt = load_model_config("gpt2-124m");
    const double b = 8, s = 1024, l = 12, h = 768, v = 50257;
    const double with_recompute = 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
    const double hardware = model_flops_per_step(gpt, 8, 1024) + recompute_flops_per_step(gpt, 8, 1024, Recompute::full);
    EXPECT_NEAR(hardware / with_recompute, 1.0, 1e-12);
    EXPECT_DOUBLE_EQ(recompute_flops_per_step(gpt, 8, 1024, Recompute::selective), 4.0 * b * l * s * s * h);
    EXPECT_DOUBLE_EQ(recompute_flops_per_step(gpt, 8, 1024, Recompute::none), 0.0);
    const ModelConfig llama = load_model_config("llama3-8b");
    EXPECT_DOUBLE_EQ(recompute_flops_per_step(llama, 2, 4096, Recompute::full),
                     llama_layers_forward_flops(llama_shape(llama), 2, 4096));
}

TEST(RecomputeFormulas, ActivationBytesPerLayer) {
    const ModelConfig gpt = load_model_config("gpt-tiny");  // h 64, a 4
    const double s = 32, b = 2, h = 64, a = 4;
    const ActivationFormula none = transformer_activation_bytes_per_layer(gpt, 32, 2, TensorSplit{});
    const ActivationFormula selective =
        transformer_activation_bytes_per_layer(gpt, 32, 2, TensorSplit{}, Recompute::selective);
    const ActivationFormula full = transformer_activation_bytes_per_layer(gpt, 32, 2, TensorSplit{}, Recompute::full);
    EXPECT_DOUBLE_EQ(none.bytes - selective.bytes, 4.0 * a * s * s * b);
    EXPECT_DOUBLE_EQ(full.bytes, 4.0 * s * b * h);
    EXPECT_DOUBLE_EQ(selective.paper_bytes, 34.0 * s * b * h);
    EXPECT_DOUBLE_EQ(full.paper_bytes, 2.0 * s * b * h);
    const ActivationFormula full_sp =
        transformer_activation_bytes_per_layer(gpt, 32, 2, TensorSplit{0, 2, true}, Recompute::full);
    EXPECT_DOUBLE_EQ(full_sp.bytes, 4.0 * s * b * h / 2);
    // Full recompute's rerun forward repeats each layer's two tp collectives.
    const auto plain = tensor_parallel_traffic_per_step(gpt, 32, 2, 1, TensorSplit{0, 2});
    const auto rerun = tensor_parallel_traffic_per_step(gpt, 32, 2, 1, TensorSplit{0, 2}, Recompute::full);
    EXPECT_DOUBLE_EQ(rerun.at("allreduce").calls - plain.at("allreduce").calls, 2.0 * gpt.layers);
}

TEST(RecomputeFormulas, ModesParseAndBadOnesAreNamed) {
    EXPECT_EQ(parse_recompute("selective"), Recompute::selective);
    EXPECT_EQ(recompute_name(Recompute::full), "full");
    EXPECT_NE(usage_error_text([] { parse_recompute("partial"); }).find("--recompute"), std::string::npos);
}

}  // namespace
}  // namespace parbench

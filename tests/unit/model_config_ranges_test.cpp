// Issue 32: a model config whose values the float kernels turn into NaN is refused before it
// runs, saying why (rope_theta 1e-300 once passed, gave NaN at step 1, and the message said to
// lower --lr); a NaN at the first step, before any update, is not blamed on --lr.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "cli/divergence_reason.hpp"
#include "tests/support/usage_error_text.hpp"
#include "theory/model_config.hpp"
#include "theory/model_layout.hpp"

namespace parbench {
namespace {

using parbench::testing::usage_error_text;

nlohmann::json tiny_llama(const char* key = nullptr, double value = 0.0) {
    nlohmann::json config = {{"kind", "llama"}, {"layers", 2},  {"hidden", 16}, {"heads", 4}, {"kv_heads", 2},
                             {"ffn_hidden", 40}, {"seq_len", 8}, {"vocab", 32}};
    if (key != nullptr) config[key] = value;
    return config;
}

std::string refusal(const nlohmann::json& config) {
    return usage_error_text([&] { parse_model_config(config, "t", "t.json"); });
}

TEST(ModelConfigRanges, RefusesARotaryBaseThatGivesNaN) {
    const std::string message = refusal(tiny_llama("rope_theta", 1e-300));
    EXPECT_NE(message.find("t.json: \"rope_theta\" is 1e-300"), std::string::npos) << message;
    EXPECT_NE(message.find("NaN"), std::string::npos) << message;
    EXPECT_FALSE(refusal(tiny_llama("rope_theta", 0.5)).empty());  // frequencies rising with the pair
    EXPECT_TRUE(refusal(tiny_llama("rope_theta", 1.0)).empty());
    EXPECT_TRUE(refusal(tiny_llama("rope_theta", 5e5)).empty());
}

// The float kernels' own range: the smallest normal float passes, the next double below does not.
TEST(ModelConfigRanges, RefusesAnEpsilonThatIsZeroInFloat) {
    const double smallest = std::numeric_limits<float>::min();
    EXPECT_TRUE(refusal(tiny_llama("norm_eps", smallest)).empty());
    const std::string message = refusal(tiny_llama("norm_eps", std::nextafter(smallest, 0.0)));
    EXPECT_NE(message.find("\"norm_eps\""), std::string::npos) << message;
    EXPECT_NE(message.find("0/0 = NaN"), std::string::npos) << message;
    EXPECT_FALSE(refusal(tiny_llama("norm_eps", 1e-300)).empty());
    EXPECT_TRUE(refusal(tiny_llama("norm_eps", 1e-6)).empty());
}

// No config sets an initial scale; the ones its sizes give stay normal floats up to the limits.
TEST(ModelConfigRanges, InitialScalesStayNormalFloatsAtTheLimits) {
    EXPECT_TRUE(std::isnormal(residual_init_stddev(static_cast<int>(model_limits::max_layers))));
    EXPECT_TRUE(std::isnormal(mlp_init_stddev(static_cast<int>(model_limits::max_hidden))));
    EXPECT_FLOAT_EQ(residual_init_stddev(12), 0.02f / std::sqrt(24.0f));
}

TEST(DivergenceReason, AFirstStepNaNIsNotBlamedOnTheLearningRate) {
    const ModelConfig llama = parse_model_config(tiny_llama("rope_theta", 1.0), "tiny", "t.json");
    const std::string first = divergence_reason({0, 5, false, 3.0, std::nan("")}, llama, 1e-3, false);
    EXPECT_NE(first.find("the loss is NaN at step 1 of 5 (warm-up), before any update, so --lr is not the cause"),
              std::string::npos)
        << first;
    EXPECT_NE(first.find("rope_theta 1 and norm_eps 1e-05"), std::string::npos) << first;
    EXPECT_EQ(first.find("lower --lr"), std::string::npos) << first;
    const std::string later = divergence_reason({2, 5, true, 3.0, std::nan("")}, llama, 1e30, true);
    EXPECT_NE(later.find("at step 3 of 5 (timed); lower --lr (now 1e+30), the usual cause; --check did not compare"),
              std::string::npos)
        << later;
}

}  // namespace
}  // namespace parbench

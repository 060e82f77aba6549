// plan's model inputs: --params lands within 1 % of any request from 10M to 1000T, the
// parameter count without a per-layer table equals the layout's, and a model too large to plan
// is refused before anything is built.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "theory/model_shape.hpp"
#include "theory/model_layout.hpp"

namespace parbench {
namespace {

TEST(PlanInputs, ParamsLandWithinOnePercentOfEveryRequest) {
    int requests = 0;
    for (double exponent = 7.0; exponent <= 15.0; exponent += 0.05) {
        const double target = std::pow(10.0, exponent);
        ModelFlags flags;
        char text[32];
        std::snprintf(text, sizeof text, "%.6g", target);
        flags.params = text;
        const ResolvedModel model = resolve_plan_model(flags);
        const double built = static_cast<double>(model_parameter_layout(model.config, model.config.seq_len).total_numel());
        EXPECT_LE(std::abs(built - target), 0.01 * target) << text << ": " << model.config.layers << " x "
                                                           << model.config.hidden << " = " << built;
        EXPECT_EQ(model.config.hidden % 128, 0);
        EXPECT_EQ(model.config.hidden / model.config.heads, 128);
        ++requests;
    }
    EXPECT_GT(requests, 150);
}

TEST(PlanInputs, SevenPointFiveBillionIsMegatronsShape) {
    ModelFlags flags;
    flags.params = "7.5B";
    const ResolvedModel model = resolve_plan_model(flags);
    EXPECT_EQ(model.config.layers, 36);
    EXPECT_EQ(model.config.hidden, 4096);
}

TEST(PlanInputs, ParameterCountWithoutATableEqualsTheLayout) {
    for (const char* name : {"gpt-small", "llama3-8b", "mlp-tiny", "gpt3-175b", "llama-tiny"}) {
        const ModelConfig config = load_model_config(name);
        EXPECT_EQ(model_parameter_count(config),
                  static_cast<double>(model_parameter_layout(config, config.seq_len).total_numel()))
            << name;
    }
}

TEST(PlanInputs, RequestsOutsideTheRangeAreRefusedNamingParams) {
    for (const char* bad : {"1e20", "1e30", "nan", "inf", "-5B", "1e400", "5", "0", "7.5X", "B"}) {
        ModelFlags flags;
        flags.params = bad;
        try {
            resolve_plan_model(flags);
            ADD_FAILURE() << "accepted --params " << bad;
        } catch (const UsageError& error) {
            EXPECT_NE(std::string(error.what()).find("--params"), std::string::npos) << error.what();
        }
    }
}

TEST(PlanInputs, AModelAboveTheParameterLimitIsRefusedBeforeItIsBuilt) {
    ModelFlags flags;
    flags.layers = 60000;
    flags.hidden = 1 << 20;
    try {
        resolve_plan_model(flags);
        ADD_FAILURE() << "accepted a 7.9e17-parameter model";
    } catch (const UsageError& error) {
        EXPECT_NE(std::string(error.what()).find("parameters"), std::string::npos) << error.what();
    }
}

}  // namespace
}  // namespace parbench

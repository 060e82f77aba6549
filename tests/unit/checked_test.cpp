#include "core/checked.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/error.hpp"

namespace parbench {
namespace {

// The message of the UsageError `action` throws ("" when it throws none).
template <typename Action>
std::string refusal(Action action) {
    try {
        action();
    } catch (const UsageError& error) {
        return error.what();
    }
    return "";
}

TEST(Checked, IntegersInRangePassAndOthersNameTheFlagAndRange) {
    EXPECT_EQ(check_int(5, "--seq", 1, 10), 5);
    EXPECT_EQ(refusal([] { check_int(-5, "--seq", 1, 16); }), "--seq -5: must be an integer from 1 to 16");
    const std::string hinted = refusal([] { check_int(0, "--gpus", 1, 8, "give the GPUs in all"); });
    EXPECT_EQ(hinted, "--gpus 0: must be an integer from 1 to 8; give the GPUs in all");
}

TEST(Checked, NumbersMustBeFiniteAndInRange) {
    EXPECT_DOUBLE_EQ(check_number(0.5, "--efficiency", 0, 1, true), 0.5);
    for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity(), 0.0, 1.5, -1.0})
        EXPECT_NE(refusal([&] { check_number(bad, "--efficiency", 0, 1, true); }).find("--efficiency"), std::string::npos)
            << bad;
    EXPECT_DOUBLE_EQ(check_number(0.0, "--x", 0, 1), 0.0);  // inclusive unless said
}

TEST(Checked, ParseFiniteTakesPlainDecimalsOnly) {
    EXPECT_DOUBLE_EQ(parse_finite("1.5", "--fbw"), 1.5);
    EXPECT_DOUBLE_EQ(parse_finite("2e3", "--fbw"), 2000.0);
    for (const char* bad : {"nan", "inf", "-inf", "", " 1", "1x", "0x10", "1e400", "infinity"})
        EXPECT_NE(refusal([&] { parse_finite(bad, "--fbw"); }).find("--fbw '"), std::string::npos) << bad;
}

TEST(Checked, ProductsNeverWrap) {
    EXPECT_EQ(checked_product({2, 3, 7}, "a x b x c", 100), 42u);
    EXPECT_EQ(checked_product({0, std::numeric_limits<std::uint64_t>::max()}, "zero", 1), 0u);
    // 2^32 x 2^32 wraps to 0 in 64 bits: refused, not accepted as 0.
    const std::string message = refusal([] { checked_product({1ull << 32, 1ull << 32}, "--tp x --pp", 1ull << 20); });
    EXPECT_EQ(message, "--tp x --pp = 4294967296 x 4294967296 exceeds 1048576");
    EXPECT_FALSE(refusal([] { checked_product({1024, 1025}, "a x b", 1 << 20); }).empty());
}

TEST(Checked, JsonFieldsNameFileAndKeyPath) {
    const nlohmann::json document = nlohmann::json::parse(
        R"({"gpus": 1e12, "half": 0.5, "eight": 8.0, "name": 5, "device": {"link": {"bw": -1}}, "list": [1, {"x": "y"}]})");
    const JsonFields root(document, "--cluster c.json");
    EXPECT_EQ(refusal([&] { root.integer("gpus", 1, 1 << 20); }),
              "--cluster c.json: \"gpus\" must be an integer from 1 to 1048576, got 1000000000000.0");
    EXPECT_NE(refusal([&] { root.integer("half", 1, 8); }).find("\"half\" must be an integer"), std::string::npos);
    EXPECT_EQ(root.integer("eight", 1, 8), 8);  // JSON Schema's integer: 8.0 is one
    EXPECT_NE(refusal([&] { root.string("name"); }).find("\"name\" must be a string, got 5"), std::string::npos);
    EXPECT_NE(refusal([&] { root.object("device").object("link").number("bw", 0, 1e7, true); })
                  .find("--cluster c.json: \"device.link.bw\" must be a finite number above 0"),
              std::string::npos);
    EXPECT_NE(refusal([&] { root.integer("missing", 1, 2); }).find("\"missing\" is missing"), std::string::npos);
    EXPECT_NE(refusal([&] { root.element("list", 0); }).find("\"list[0]\" must be a JSON object"), std::string::npos);
    EXPECT_EQ(root.element("list", 1).string("x"), "y");
    EXPECT_NE(refusal([&] { root.refuse_unknown_keys({"gpus"}); }).find("is not a known key"), std::string::npos);
    EXPECT_NE(refusal([] { JsonFields(nlohmann::json::array(), "--cluster c.json"); }).find("expected a JSON object"),
              std::string::npos);
}

}  // namespace
}  // namespace parbench

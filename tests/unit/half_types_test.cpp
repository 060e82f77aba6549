#include "kernels/half_types.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace parbench {
namespace {

TEST(HalfTypes, SmallIntegersRoundTripExactly) {
    for (int i = -2048; i <= 2048; ++i) EXPECT_EQ(to_float(to_half(static_cast<float>(i))), static_cast<float>(i));
    for (int i = -256; i <= 256; ++i)
        EXPECT_EQ(to_float(to_bfloat16(static_cast<float>(i))), static_cast<float>(i));
}

TEST(HalfTypes, KnownBitPatterns) {
    EXPECT_EQ(to_half(1.0f).bits, 0x3c00);
    EXPECT_EQ(to_half(-2.0f).bits, 0xc000);
    EXPECT_EQ(to_half(65504.0f).bits, 0x7bff);
    EXPECT_EQ(to_half(1e6f).bits, 0x7c00);                // overflow to infinity
    EXPECT_EQ(to_half(5.9604645e-08f).bits, 0x0001);      // smallest subnormal
    EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3f80);
    EXPECT_EQ(to_bfloat16(3.0f).bits, 0x4040);
    EXPECT_TRUE(std::isnan(to_float(to_half(std::numeric_limits<float>::quiet_NaN()))));
    EXPECT_TRUE(std::isnan(to_float(to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(HalfTypes, RoundsToNearestEven) {
    EXPECT_EQ(to_float(to_half(2049.0f)), 2048.0f);  // tie goes to the even mantissa
    EXPECT_EQ(to_float(to_half(2051.0f)), 2052.0f);
    EXPECT_EQ(to_float(to_bfloat16(257.0f)), 256.0f);
    EXPECT_EQ(to_float(to_bfloat16(259.0f)), 260.0f);
    EXPECT_EQ(to_float(to_half(6.1035156e-05f / 3.0f)), to_float(Half{0x0155}));  // subnormal rounding
}

}  // namespace
}  // namespace parbench

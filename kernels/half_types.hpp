// 16-bit floating types stored as raw bits, with conversions written once for host and
// device. Only conversions are needed: arithmetic happens in float, as NCCL does for the
// reductions of these types.
#pragma once

#include <cstdint>
#include <cstring>

#include "host_device.hpp"

namespace parbench {

struct Half {
    std::uint16_t bits;
};
struct BFloat16 {
    std::uint16_t bits;
};

PARBENCH_HD std::uint32_t float_bits(float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
}

PARBENCH_HD float float_from_bits(std::uint32_t bits) {
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

// Round to nearest even, keeping NaN a NaN.
PARBENCH_HD BFloat16 to_bfloat16(float value) {
    std::uint32_t bits = float_bits(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<std::uint16_t>((bits >> 16) | 0x40u)};
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return BFloat16{static_cast<std::uint16_t>(bits >> 16)};
}

PARBENCH_HD float to_float(BFloat16 value) { return float_from_bits(static_cast<std::uint32_t>(value.bits) << 16); }

// IEEE binary16, round to nearest even; overflow goes to infinity, tiny values to subnormals.
PARBENCH_HD Half to_half(float value) {
    const std::uint32_t bits = float_bits(value);
    const std::uint32_t sign = (bits >> 16) & 0x8000u;
    const std::uint32_t abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u) return Half{static_cast<std::uint16_t>(sign | 0x7e00u)};
    if (abs >= 0x477ff000u) return Half{static_cast<std::uint16_t>(sign | 0x7c00u)};  // rounds past 65504
    if (abs < 0x38800000u) {  // below the smallest normal half: a subnormal or zero
        if (abs < 0x33000000u) return Half{static_cast<std::uint16_t>(sign)};
        const std::uint32_t exponent = abs >> 23;
        const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126u - exponent;  // 14..24
        std::uint32_t half = mantissa >> shift;
        const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
        const std::uint32_t halfway = 1u << (shift - 1u);
        if (remainder > halfway || (remainder == halfway && (half & 1u))) ++half;
        return Half{static_cast<std::uint16_t>(sign | half)};
    }
    std::uint32_t rebased = abs - 0x38000000u;  // exponent bias 127 -> 15
    rebased += 0xfffu + ((rebased >> 13) & 1u);
    return Half{static_cast<std::uint16_t>(sign | (rebased >> 13))};
}

PARBENCH_HD float to_float(Half value) {
    const std::uint32_t sign = static_cast<std::uint32_t>(value.bits & 0x8000u) << 16;
    const std::uint32_t exponent = (value.bits >> 10) & 0x1fu;
    std::uint32_t mantissa = value.bits & 0x3ffu;
    if (exponent == 0x1fu) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
    if (exponent != 0) return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    if (mantissa == 0) return float_from_bits(sign);
    std::uint32_t normalised_exponent = 113u;  // subnormal: shift until the leading 1 is implicit
    while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --normalised_exponent;
    }
    return float_from_bits(sign | (normalised_exponent << 23) | ((mantissa & 0x3ffu) << 13));
}

}  // namespace parbench

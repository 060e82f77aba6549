// exp(x) in float without a library call, so that the CPU loops that take it (softmax,
// cross-entropy, GELU, SiLU) vectorise, and the CUDA kernels run the same arithmetic.
// Cody & Waite range reduction x = n ln2 + r, |r| <= ln2/2, with ln2 split in two so that
// n ln2 is exact, then Cephes' degree-7 minimax polynomial for exp(r) (S. Moshier, Cephes
// Math Library, expf.c) and the scaling by 2^n built in the exponent bits. Branch-free: the
// clamps and the underflow are selects, which the vectoriser turns into min/max/blend.
// Accuracy: within 2 ulp of the correctly rounded exp over [-87.3, 88] (tested against
// double-precision exp in tests/ops/math_test.cpp); below -87.3 it returns 0 (expf gives a
// subnormal below 1.2e-38), above 88 it saturates at exp(88) = 1.65e38.
#pragma once

#include <cstdint>
#include <cstring>

#include "host_device.hpp"

namespace parbench {

PARBENCH_HD float float_from_bits(std::int32_t bits) {
#if defined(__CUDA_ARCH__)
    return __int_as_float(bits);
#else
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
#endif
}

PARBENCH_HD float fast_exp(float x) {
    constexpr float lowest = -87.33654f;  // ln(2^-126): 2^n stays a normal float
    constexpr float highest = 88.0f;      // keeps n <= 127
    constexpr float log2e = 1.44269504088896341f;
    constexpr float ln2_high = 0.693359375f;  // 8 significant bits: n * ln2_high is exact
    constexpr float ln2_low = -2.12194440e-4f;
    constexpr float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const bool underflows = x < lowest;
    float clamped = x < lowest ? lowest : x;
    clamped = clamped > highest ? highest : clamped;
    const float n = (clamped * log2e + round_magic) - round_magic;
    float r = clamped - n * ln2_high;
    r = r - n * ln2_low;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float exp_r = p * r * r + r + 1.0f;
    const float two_to_n = float_from_bits((static_cast<std::int32_t>(n) + 127) << 23);
    return underflows ? 0.0f : exp_r * two_to_n;
}

}  // namespace parbench

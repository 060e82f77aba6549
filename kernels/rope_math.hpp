// Rotary position embedding (Su et al., RoFormer, arXiv 2104.09864 sec. 3.4.2): inside each
// head of size hs, channel pair (2i, 2i+1) of the token at position p turns by the angle
//   p * theta^(-2i/hs),   i = 0 .. hs/2 - 1
// (theta 10000 in the paper, 500000 in Llama 3). Applied to queries and keys, so their dot
// product depends only on the distance between positions. A rotation's transpose is its
// inverse, so the backward turns the gradient pair by the negative angle. The angle is taken
// by position, not by row index: under context parallelism each rank rotates its own tokens.
#pragma once

#include <cmath>

#include "host_device.hpp"

namespace parbench {

PARBENCH_HD float rope_angle(int position, int pair, int head_size, float theta) {
    const float exponent = -2.0f * static_cast<float>(pair) / static_cast<float>(head_size);
    return static_cast<float>(position) * expf(exponent * logf(theta));
}

// The pair turned by the angle whose cosine is c and whose sine, times the direction, is s:
// rope_rotate with the trigonometry done by the caller, which turns every head (and every
// sequence of the batch) by the same angles.
PARBENCH_HD void rope_rotate_by(float& x0, float& x1, float c, float s) {
    const float y0 = x0 * c - x1 * s;
    const float y1 = x0 * s + x1 * c;
    x0 = y0;
    x1 = y1;
}

// Turns (x0, x1) by `direction` * angle: +1 forward, -1 backward.
PARBENCH_HD void rope_rotate(float& x0, float& x1, float angle, float direction) {
    rope_rotate_by(x0, x1, cosf(angle), direction * sinf(angle));
}

}  // namespace parbench

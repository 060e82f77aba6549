// Rotary position embedding on the CPU, in place on (B,T,H*hs); positions (T).
#include <cstddef>

#include "kernels/rope_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

void rotate_all(float* x, const int* positions, int B, int T, int H, int hs, float theta, float direction) {
    const std::size_t width = static_cast<std::size_t>(H) * hs;
    for (std::size_t b = 0; b < static_cast<std::size_t>(B); ++b)
        for (std::size_t t = 0; t < static_cast<std::size_t>(T); ++t)
            for (int pair = 0; pair < hs / 2; ++pair) {
                const float angle = rope_angle(positions[t], pair, hs, theta);
                for (std::size_t h = 0; h < static_cast<std::size_t>(H); ++h) {
                    float* head = x + (b * T + t) * width + h * hs;
                    rope_rotate(head[2 * pair], head[2 * pair + 1], angle, direction);
                }
            }
}

}  // namespace

void CpuOps::rope_forward(float* x, const int* positions, int B, int T, int H, int hs, float theta) {
    rotate_all(x, positions, B, T, H, hs, theta, 1.0f);
}

void CpuOps::rope_backward(float* dx, const int* positions, int B, int T, int H, int hs, float theta) {
    rotate_all(dx, positions, B, T, H, hs, theta, -1.0f);
}

}  // namespace parbench

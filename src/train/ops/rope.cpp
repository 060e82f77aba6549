// Rotary position embedding on the CPU, in place on (B,T,H*hs); positions (T).
// A token's angles depend on its position and the pair only, so each position's cosines and
// sines are taken once (hs/2 of each) and turn every head of every sequence at that position.
#include <cstddef>
#include <vector>

#include "kernels/rope_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

// turns: scratch of hs floats, grown once and reused.
void rotate_all(float* x, const int* positions, int B, int T, int H, int hs, float theta, float direction,
                std::vector<float>& turns) {
    const std::size_t width = static_cast<std::size_t>(H) * hs;
    const int pairs = hs / 2;
    if (turns.size() < static_cast<std::size_t>(2 * pairs)) turns.resize(static_cast<std::size_t>(2 * pairs));
    for (std::size_t t = 0; t < static_cast<std::size_t>(T); ++t) {
        for (int pair = 0; pair < pairs; ++pair) {
            const float angle = rope_angle(positions[t], pair, hs, theta);
            turns[2 * static_cast<std::size_t>(pair)] = cosf(angle);
            turns[2 * static_cast<std::size_t>(pair) + 1] = direction * sinf(angle);
        }
        for (std::size_t b = 0; b < static_cast<std::size_t>(B); ++b)
            for (std::size_t h = 0; h < static_cast<std::size_t>(H); ++h) {
                float* head = x + (b * T + t) * width + h * hs;
                for (std::size_t pair = 0; pair < static_cast<std::size_t>(pairs); ++pair)
                    rope_rotate_by(head[2 * pair], head[2 * pair + 1], turns[2 * pair], turns[2 * pair + 1]);
            }
    }
}

}  // namespace

void CpuOps::rope_forward(float* x, const int* positions, int B, int T, int H, int hs, float theta) {
    rotate_all(x, positions, B, T, H, hs, theta, 1.0f, rope_turns_);
}

void CpuOps::rope_backward(float* dx, const int* positions, int B, int T, int H, int hs, float theta) {
    rotate_all(dx, positions, B, T, H, hs, theta, -1.0f, rope_turns_);
}

}  // namespace parbench

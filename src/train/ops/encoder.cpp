// Token + position embedding on the CPU, for the whole vocabulary or one shard of it.
// Backward accumulates (+=) into dwte and dwpe.
#include <algorithm>
#include <cstddef>

#include "train/ops/cpu_ops.hpp"

namespace parbench {

// out (B,T,C); tokens (B,T); wte (shard.size,C); wpe (maxT,C) or nullptr
void CpuOps::encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C,
                             VocabShard shard) {
    for (std::size_t b = 0; b < static_cast<std::size_t>(B); ++b) {
        for (std::size_t t = 0; t < static_cast<std::size_t>(T); ++t) {
            float* y = out + (b * T + t) * C;
            const int token = tokens[b * T + t];
            if (shard.contains(token))
                std::copy(wte + static_cast<std::size_t>(token - shard.start) * C,
                          wte + static_cast<std::size_t>(token - shard.start + 1) * C, y);
            else
                std::fill(y, y + C, 0.0f);
            if (wpe != nullptr)
                for (int c = 0; c < C; ++c) y[c] += wpe[t * C + c];
        }
    }
}

void CpuOps::encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C,
                              VocabShard shard) {
    for (std::size_t b = 0; b < static_cast<std::size_t>(B); ++b) {
        for (std::size_t t = 0; t < static_cast<std::size_t>(T); ++t) {
            const float* dy = dout + (b * T + t) * C;
            const int token = tokens[b * T + t];
            if (shard.contains(token)) {
                float* dw = dwte + static_cast<std::size_t>(token - shard.start) * C;
                for (int c = 0; c < C; ++c) dw[c] += dy[c];
            }
            if (dwpe != nullptr)
                for (int c = 0; c < C; ++c) dwpe[t * C + c] += dy[c];
        }
    }
}

}  // namespace parbench

// Strided row copies on the CPU: the packing and unpacking of context parallelism's
// resharding (a head group of every token, a chunk of every sequence).
#include <algorithm>

#include "train/ops/cpu_ops.hpp"

namespace parbench {

void CpuOps::copy_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch, std::size_t width,
                       std::size_t rows) {
    for (std::size_t r = 0; r < rows; ++r) std::copy_n(src + r * src_pitch, width, dst + r * dst_pitch);
}

void CpuOps::add_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch, std::size_t width,
                      std::size_t rows) {
    for (std::size_t r = 0; r < rows; ++r) {
        const float* s = src + r * src_pitch;
        float* d = dst + r * dst_pitch;
        for (std::size_t i = 0; i < width; ++i) d[i] += s[i];
    }
}

}  // namespace parbench

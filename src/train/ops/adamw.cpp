// AdamW on the CPU: fp32 parameters, gradients and moments, updated in place in one pass over
// the four arrays (a branch-free loop the compiler vectorises). The variants that also sum the
// gradients' squares (the grad norm) go in pieces that stay in L1: each piece's squares, then
// its update, so the gradients come from memory once.
#include <algorithm>

#include "kernels/adamw_math.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cpu_simd.hpp"

namespace parbench {
namespace {

PARBENCH_SIMD_LOOP void adamw_loop(float* __restrict params, const float* __restrict grads, float* __restrict m,
                                   float* __restrict v, std::size_t n, AdamWHyper hyper) {
    for (std::size_t i = 0; i < n; ++i) adamw_step(params[i], grads[i], m[i], v[i], hyper);
}

PARBENCH_SIMD_LOOP void adamw_clearing_loop(float* __restrict params, float* __restrict grads,
                                            float* __restrict m, float* __restrict v, std::size_t n,
                                            AdamWHyper hyper) {
    for (std::size_t i = 0; i < n; ++i) {
        adamw_step(params[i], grads[i], m[i], v[i], hyper);
        grads[i] = 0.0f;
    }
}

// Elements per piece of the summing variants: 16 KiB of gradients.
constexpr std::size_t squares_piece = 4096;

PARBENCH_SIMD_LOOP float piece_squares(const float* __restrict x, std::size_t n) {
    return simd::lane_sum(n, [x](std::size_t i) PARBENCH_SIMD_BODY { return x[i] * x[i]; });
}

// Each piece's float sum (at most 4096 squares over 16 lanes) is added in double; update(at,
// count) follows each piece's sum, while the piece is in cache.
template <typename Update>
PARBENCH_SIMD_LOOP double update_summing_squares(const float* grads, std::size_t n, Update update) {
    double squares = 0.0;
    for (std::size_t begin = 0; begin < n; begin += squares_piece) {
        const std::size_t count = std::min(squares_piece, n - begin);
        squares += static_cast<double>(piece_squares(grads + begin, count));
        update(begin, count);
    }
    return squares;
}

}  // namespace

double CpuOps::sum_of_squares(const float* x, std::size_t n) {
    double squares = 0.0;
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        squares = update_summing_squares(x, n, [](std::size_t, std::size_t) PARBENCH_SIMD_BODY {});
    });
    return squares;
}

double CpuOps::adamw_update_squares(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                                    float beta1, float beta2, float eps, float weight_decay, int step) {
    const AdamWHyper hyper = adamw_hyper(lr, beta1, beta2, eps, weight_decay, step);
    double squares = 0.0;
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        squares = update_summing_squares(grads, n, [&](std::size_t at, std::size_t count) PARBENCH_SIMD_BODY {
            adamw_loop(params + at, grads + at, m + at, v + at, count, hyper);
        });
    });
    return squares;
}

double CpuOps::adamw_update_clearing_grads_squares(float* params, float* grads, float* m, float* v, std::size_t n,
                                                   float lr, float beta1, float beta2, float eps, float weight_decay,
                                                   int step) {
    const AdamWHyper hyper = adamw_hyper(lr, beta1, beta2, eps, weight_decay, step);
    double squares = 0.0;
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        squares = update_summing_squares(grads, n, [&](std::size_t at, std::size_t count) PARBENCH_SIMD_BODY {
            adamw_clearing_loop(params + at, grads + at, m + at, v + at, count, hyper);
        });
    });
    return squares;
}

void CpuOps::adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                          float beta1, float beta2, float eps, float weight_decay, int step) {
    const AdamWHyper hyper = adamw_hyper(lr, beta1, beta2, eps, weight_decay, step);
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY { adamw_loop(params, grads, m, v, n, hyper); });
}

void CpuOps::adamw_update_clearing_grads(float* params, float* grads, float* m, float* v, std::size_t n, float lr,
                                         float beta1, float beta2, float eps, float weight_decay, int step) {
    const AdamWHyper hyper = adamw_hyper(lr, beta1, beta2, eps, weight_decay, step);
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY { adamw_clearing_loop(params, grads, m, v, n, hyper); });
}

}  // namespace parbench

// Linear layers on the CPU through OpenBLAS, or through skinny_gemm where it suits (a few rows).
// Backward accumulates (+=): beta = 1 (beta = 0 for the overwrite form's input gradient).
#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "theory/mlp_buffers.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cpu_simd.hpp"
#include "train/ops/skinny_gemm.hpp"

namespace parbench {
namespace {

// dbias (OC) += the column sums of dout (N,OC), row by row (the same order as a scalar loop).
PARBENCH_SIMD_LOOP void add_column_sums(float* __restrict dbias, const float* __restrict dout, std::size_t N,
                                        std::size_t OC) {
    for (std::size_t n = 0; n < N; ++n)
        for (std::size_t o = 0; o < OC; ++o) dbias[o] += dout[n * OC + o];
}

}  // namespace

// out (N,OC) = inp (N,C) · weight (OC,C)ᵀ + bias (OC)
void CpuOps::matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                            int OC) {
    if (uses_skinny_gemm(N)) {
        skinny_gemm::forward(out, inp, weight, bias, N, C, OC, skinny_scratch_);
        return;
    }
    // Seeding out with the bias lets sgemm add the product in the same pass (beta = 1).
    float beta = 0.0f;
    if (bias != nullptr) {
        for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n)
            std::copy(bias, bias + OC, out + n * static_cast<std::size_t>(OC));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

// dinp (N,C) = dinp_beta dinp + dout (N,OC) · weight (OC,C); dweight, dbias +=.
void CpuOps::linear_backward(float* dinp, float dinp_beta, float* dweight, float* dbias, const float* dout,
                             const float* inp, const float* weight, int N, int C, int OC) {
    if (dinp != nullptr) CpuOps::matmul_input_gradient_rows(dinp, dout, weight, N, C, OC, 0, OC, dinp_beta != 0.0f);
    // dweight (OC,C) += dout (N,OC)ᵀ · inp (N,C)
    if (dweight != nullptr) {
        if (uses_skinny_gemm(N))
            skinny_gemm::weight_gradient(dweight, 1.0f, dout, inp, N, C, OC, 0, OC, skinny_scratch_);
        else
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    }
    // dbias (OC) += column sums of dout
    if (dbias != nullptr)
        simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
            add_column_sums(dbias, dout, static_cast<std::size_t>(N), static_cast<std::size_t>(OC));
        });
}

void CpuOps::matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                             const float* weight, int N, int C, int OC) {
    linear_backward(dinp, 1.0f, dweight, dbias, dout, inp, weight, N, C, OC);
}

// beta = 0: sgemm writes dinp without reading it (0 + x is x: the same values as the += form
// on a zeroed buffer).
void CpuOps::matmul_backward_overwrite_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                             const float* inp, const float* weight, int N, int C, int OC) {
    linear_backward(dinp, 0.0f, dweight, dbias, dout, inp, weight, N, C, OC);
}

// Row-major dout[:, first:first+rows] is a (N, rows) matrix with leading dimension OC: sgemm
// reads the piece in place. beta = 0 writes the rows without reading them (0 + x is x: the same
// values as the += form on a zeroed buffer).
void CpuOps::matmul_weight_gradient_rows(float* dweight_rows, const float* dout, const float* inp, int N, int C,
                                         int OC, int first, int rows) {
    if (uses_skinny_gemm(N)) {
        skinny_gemm::weight_gradient(dweight_rows, 0.0f, dout, inp, N, C, OC, first, rows, skinny_scratch_);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, C, N, 1.0f, dout + first, OC, inp, C, 0.0f,
                dweight_rows, C);
}

// The MLP's fused update takes the input gradient in pieces of mlp_gradient_piece_rows rows: each
// must start a band for the pieces to add up to the unfused input gradient's bits.
static_assert(mlp_gradient_piece_rows % skinny_gemm::input_gradient_band_rows == 0,
              "the MLP's pieces must be whole bands of skinny_gemm's input gradient");

void CpuOps::matmul_input_gradient_rows(float* dinp, const float* dout, const float* weight, int N, int C, int OC,
                                        int first, int rows, bool accumulate) {
    const float beta = accumulate ? 1.0f : 0.0f;
    if (uses_skinny_gemm(N)) {
        skinny_gemm::input_gradient(dinp, beta, dout, weight, N, C, OC, first, rows, skinny_scratch_);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, rows, 1.0f, dout + first, OC,
                weight + static_cast<std::size_t>(first) * static_cast<std::size_t>(C), C, beta, dinp, C);
}

namespace {

// The fp32 values of n bf16 numbers in `scratch` (exact: bf16 is a truncated fp32), or
// nullptr for a null operand, which the matmul then does not read.
const float* widen(std::vector<float>& scratch, const BFloat16* values, std::size_t n) {
    if (values == nullptr) return nullptr;
    if (scratch.size() < n) scratch.resize(n);
    for (std::size_t i = 0; i < n; ++i) scratch[i] = to_float(values[i]);
    return scratch.data();
}

std::size_t elements(int rows, int columns) { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(columns); }

}  // namespace

void CpuOps::cast_to_bf16(BFloat16* out, const float* inp, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = to_bfloat16(inp[i]);
}

void CpuOps::matmul_forward_bf16(float* out, const BFloat16* inp, const BFloat16* weight, const float* bias, int N,
                                 int C, int OC) {
    matmul_forward(out, widen(widened_inp_, inp, elements(N, C)), widen(widened_weight_, weight, elements(OC, C)),
                   bias, N, C, OC);
}

void CpuOps::matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const BFloat16* dout,
                                  const BFloat16* inp, const BFloat16* weight, int N, int C, int OC) {
    matmul_backward(dinp, dweight, dbias, widen(widened_dout_, dout, elements(N, OC)),
                    widen(widened_inp_, inp, elements(N, C)), widen(widened_weight_, weight, elements(OC, C)), N,
                    C, OC);
}

}  // namespace parbench

// A linear layer's three products when the batch is a few rows (an MLP step of 64 rows), with
// AVX2 + FMA. OpenBLAS copies ("packs") both operands into its own layout on every call and
// reads the weight a strip of columns at a time, rows 4 KB apart: for 64 rows against a
// 1024 x 1024 weight that copy costs a fifth of the product or more, and more still when the
// weight comes from memory, as it does in a training step. Here the weight is read row after
// row: in place by the forward pass, copied a band of rows at a time by the input
// gradient; the small operands (N x C) are transposed or copied once per call.
//
// One register tile for all three: 6 rows x 16 columns of the result, 12 accumulators, a
// broadcast row operand against 16 loaded column values per multiply-add. Each result is one
// FMA chain in the order of the summed index (the input gradient: one per band of 256, added
// in order), so its bits do not depend on where the tiles fall.
#pragma once

#include <vector>

#include "device/cpu_kernels.hpp"

namespace parbench::skinny_gemm {

// True when this CPU has AVX2 and FMA (and the build holds these functions): they may be called.
bool runs_here();
// True when they are the better choice: they run here, the ops take the avx2 path (an AVX-512
// CPU keeps OpenBLAS's 16-wide kernels, these being 8-wide; not measured), and a product of
// `batch_rows` rows is small enough that they win over OpenBLAS.
bool suits(CpuKernels kernels, int batch_rows);

// The operands' copies; they only grow, to the largest layer, so a step allocates nothing.
struct Scratch {
    std::vector<float> input_panels;   // forward: inpᵀ in panels of 16 batch rows
    std::vector<float> weight_strips;  // input gradient: a band of weight rows, by 16 columns
    std::vector<float> input_strips;   // weight gradient: inp by 16 columns
    // Which inp input_strips holds, and the row its next piece starts at: the pieces of one
    // weight gradient, asked for in order, copy inp once.
    struct StripsOf {
        const float* inp = nullptr;
        int N = 0, C = 0, next_row = -1;
        bool operator==(const StripsOf&) const = default;
    } input_strips_of;
    std::vector<float> dout_columns;   // weight gradient: the piece's columns of dout, transposed
};

// out (N,OC) = inp (N,C) · weight (OC,C)ᵀ (+ bias (OC) when not null).
void forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC,
             Scratch& scratch);

// The input gradient's band of weight rows: a strip (256 x 16 floats, 16 KB) stays in L1 while
// every batch row block reads it. Measured at N = 64, C = OC = 1024 on the Zen 3: bands of 32,
// 64, 128, 256 and 512 rows 59, 66, 73, 79 and 80 GFLOP/s (a deeper tile adds to dinp less
// often), OpenBLAS 80; 256 is as fast as 512 with half the copy (1 MB at C = 1024).
inline constexpr int input_gradient_band_rows = 256;

// dinp (N,C) = beta dinp + dout[:, first:first+rows] · weight[first:first+rows, :], dout (N,OC),
// weight (OC,C); beta 0 (dinp not read) or 1. The rows are summed in bands of
// input_gradient_band_rows from `first`: ranges that start at multiples of it, taken in order,
// give the bits of the whole.
void input_gradient(float* dinp, float beta, const float* dout, const float* weight, int N, int C, int OC, int first,
                    int rows, Scratch& scratch);

// dweight (rows,C) = beta dweight + dout[:, first:first+rows]ᵀ · inp (N,C), dout (N,OC); beta 0
// (dweight not read) or 1. A call that continues the previous one (first = its first + rows,
// the same inp) reuses its copy of inp: inp must not change between the pieces of one gradient.
void weight_gradient(float* dweight, float beta, const float* dout, const float* inp, int N, int C, int OC, int first,
                     int rows, Scratch& scratch);

}  // namespace parbench::skinny_gemm

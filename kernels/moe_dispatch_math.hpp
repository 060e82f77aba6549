// A mixture-of-experts layer's permutation and weighted combine, per element (the CPU ops and
// kernels/moe.cu both call these, so the CPU tests cover what the GPU runs). Assignment
// a = t·k + i is token t's i-th choice; slot[a] is its row in the expert-major order the experts
// read (train/moe/router.hpp), -1 when the capacity dropped it. Rows are C floats.
//
//   dispatch:          dispatched[slot[a]] = x[t]                      for each kept a
//   combine:           out[t] += sum_{i kept} w_ti · expert_out[slot[t·k+i]]
//   combine backward:  d(w_ti) = dy_t · expert_out[slot]  (0 when dropped),
//                      d(expert_out[slot]) = w_ti · dy_t
//   dispatch backward: dx[t] += sum_{i kept} ddispatched[slot[t·k+i]]
//
// Sums over a token's choices run in choice order i = 0..k-1, so each element is the same
// float sum whatever thread computes it.
#pragma once

#include <cstddef>

#include "host_device.hpp"

namespace parbench {

// Element c of token t's combined output: `out` (its value before) plus the kept choices'
// weighted expert outputs. slot, weights: the token's k entries; expert_out (rows, C).
PARBENCH_HD float moe_combine_element(float out, const float* expert_out, const int* slot, const float* weights, int k,
                                      int C, int c) {
    for (int i = 0; i < k; ++i) {
        if (slot[i] < 0) continue;
        out += weights[i] * expert_out[static_cast<std::size_t>(slot[i]) * C + c];
    }
    return out;
}

// One kept assignment's combine backward: dexpert_row (C) = weight · dy (overwritten); returns
// d(weight) = dy · expert_row, summed in c order.
PARBENCH_HD float moe_combine_backward_assignment(float* dexpert_row, const float* dy, const float* expert_row,
                                                  float weight, int C) {
    float dot = 0.0f;
    for (int c = 0; c < C; ++c) {
        dot += dy[c] * expert_row[c];
        dexpert_row[c] = weight * dy[c];
    }
    return dot;
}

// Element c of token t's input gradient from its kept assignments' rows of ddispatched
// (rows, C): `dx` (its value before) plus their sum.
PARBENCH_HD float moe_dispatch_backward_element(float dx, const float* ddispatched, const int* slot, int k, int C,
                                                int c) {
    for (int i = 0; i < k; ++i) {
        if (slot[i] < 0) continue;
        dx += ddispatched[static_cast<std::size_t>(slot[i]) * C + c];
    }
    return dx;
}

}  // namespace parbench

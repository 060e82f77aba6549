// A mixture-of-experts layer's routing, permutation and combine on the CPU: loops over the
// per-token and per-element functions of kernels/moe_router_math.hpp and
// kernels/moe_dispatch_math.hpp, which kernels/moe.cu runs on a GPU.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/moe_dispatch_math.hpp"
#include "kernels/moe_router_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {

void CpuOps::moe_route(float* scores, int* chosen, float* weights, const float* logits, const float* bias, int N,
                       int E, int k, MoeScore score) {
    for (int t = 0; t < N; ++t) {
        const std::size_t row = static_cast<std::size_t>(t) * E, choices = static_cast<std::size_t>(t) * k;
        moe_route_token(scores + row, chosen + choices, weights + choices, logits + row, bias, E, k, score);
    }
}

void CpuOps::moe_dispatch(float* dispatched, const float* x, const int* slot, int N, int k, int C) {
    const std::size_t row = static_cast<std::size_t>(C);
    for (int t = 0; t < N; ++t)
        for (int i = 0; i < k; ++i) {
            const int s = slot[t * k + i];
            if (s >= 0) std::copy_n(x + static_cast<std::size_t>(t) * row, C, dispatched + static_cast<std::size_t>(s) * row);
        }
}

void CpuOps::moe_combine(float* out, const float* expert_out, const int* slot, const float* weights, int N, int k,
                         int C) {
    for (int t = 0; t < N; ++t) {
        float* out_row = out + static_cast<std::size_t>(t) * C;
        const std::size_t choices = static_cast<std::size_t>(t) * k;
        for (int c = 0; c < C; ++c)
            out_row[c] = moe_combine_element(out_row[c], expert_out, slot + choices, weights + choices, k, C, c);
    }
}

void CpuOps::moe_combine_backward(float* dexpert_out, float* dweights, const float* dout, const float* expert_out,
                                  const int* slot, const float* weights, int N, int k, int C) {
    for (int a = 0; a < N * k; ++a) {
        dweights[a] = 0.0f;
        if (slot[a] < 0) continue;
        const std::size_t row = static_cast<std::size_t>(slot[a]) * C;
        dweights[a] = moe_combine_backward_assignment(dexpert_out + row, dout + static_cast<std::size_t>(a / k) * C,
                                                      expert_out + row, weights[a], C);
    }
}

void CpuOps::moe_dispatch_backward(float* dx, const float* ddispatched, const int* slot, int N, int k, int C) {
    for (int t = 0; t < N; ++t) {
        float* row = dx + static_cast<std::size_t>(t) * C;
        const int* token_slots = slot + static_cast<std::size_t>(t) * k;
        for (int c = 0; c < C; ++c) row[c] = moe_dispatch_backward_element(row[c], ddispatched, token_slots, k, C, c);
    }
}

void CpuOps::moe_route_backward(float* dlogits, const float* dweights, const float* scores, const float* weights,
                                const int* chosen, const int* routed, double balance_weight, int N, int E, int k,
                                MoeScore score) {
    std::fill(dlogits, dlogits + static_cast<std::size_t>(N) * E, 0.0f);
    std::vector<float> coefficients(static_cast<std::size_t>(E));
    for (int e = 0; e < E; ++e)
        coefficients[static_cast<std::size_t>(e)] = moe_balance_coefficient(balance_weight, E, routed[e], N, k);
    for (int t = 0; t < N; ++t) {
        const std::size_t row = static_cast<std::size_t>(t) * E, choices = static_cast<std::size_t>(t) * k;
        moe_weights_backward(dlogits + row, dweights + choices, weights + choices, scores + row, chosen + choices, k,
                             score);
        if (balance_weight != 0.0) moe_balance_backward(dlogits + row, coefficients.data(), scores + row, E, score);
    }
}

void CpuOps::copy_to_host(void* host, const void* source, std::size_t bytes) {
    if (bytes > 0) std::memcpy(host, source, bytes);
}

void CpuOps::copy_from_host(void* target, const void* host, std::size_t bytes) {
    if (bytes > 0) std::memcpy(target, host, bytes);
}

}  // namespace parbench

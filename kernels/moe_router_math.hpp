// A mixture-of-experts router's per-token math (train/moe/router.cpp and the CPU ops call it,
// kernels/moe.cu's kernels call the same functions). One token's E router logits z give
// scores s and the top-k experts, whose combine weights w scale the experts' outputs:
//
//   softmax (Mixtral, arXiv 2401.04088 sec. 2.1; Megatron-core's default score function):
//     s = softmax(z); chosen = top-k of s; w_i = s_i / sum_{j chosen} s_j  (= softmax over the
//     chosen logits). Backward: dz_j = w_j (dw_j - sum_{i chosen} w_i dw_i) for j chosen, 0 else.
//   sigmoid (DeepSeek-V3, arXiv 2412.19437 sec. 2.1.2 eqs. 13-16):
//     s = sigmoid(z); chosen = top-k of s + b (the balancing bias b steers the choice only);
//     w_i = s_i / sum_{j chosen} s_j. Backward: ds_j = (dw_j - sum_i w_i dw_i) / S for j chosen,
//     S = sum_{j chosen} s_j, then dz_j = ds_j s_j (1 - s_j).
//
// Ties: the lower expert index wins, so a run is reproducible on any device and rank count.
#pragma once

#include "host_device.hpp"
#include "swiglu_math.hpp"

namespace parbench {

enum class MoeScore { softmax, sigmoid };

// scores (E) from logits (E).
PARBENCH_HD void moe_scores(float* scores, const float* logits, int E, MoeScore score) {
    if (score == MoeScore::sigmoid) {
        for (int e = 0; e < E; ++e) scores[e] = sigmoid(logits[e]);
        return;
    }
    float max = logits[0];
    for (int e = 1; e < E; ++e) max = logits[e] > max ? logits[e] : max;
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) {
        scores[e] = fast_exp(logits[e] - max);
        sum += scores[e];
    }
    for (int e = 0; e < E; ++e) scores[e] /= sum;
}

// chosen (k) = the k largest of scores[e] + bias[e] (bias may be null), largest first; a tie
// goes to the lower index (strict > while scanning upwards). k <= E.
PARBENCH_HD void moe_top_k(int* chosen, const float* scores, const float* bias, int E, int k) {
    for (int i = 0; i < k; ++i) {
        int best = -1;
        float best_value = 0.0f;
        for (int e = 0; e < E; ++e) {
            bool taken = false;
            for (int j = 0; j < i; ++j) taken = taken || chosen[j] == e;
            if (taken) continue;
            const float value = scores[e] + (bias != nullptr ? bias[e] : 0.0f);
            if (best < 0 || value > best_value) {
                best = e;
                best_value = value;
            }
        }
        chosen[i] = best;
    }
}

// weights (k): the chosen scores normalised to sum to 1 (both score functions).
PARBENCH_HD void moe_combine_weights(float* weights, const float* scores, const int* chosen, int k) {
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += scores[chosen[i]];
    for (int i = 0; i < k; ++i) weights[i] = scores[chosen[i]] / sum;
}

// One token's routing: its scores (E), chosen experts (k) and combine weights (k) from its
// logits (E), the three steps above in order. bias (E) or null, as for moe_top_k.
PARBENCH_HD void moe_route_token(float* scores, int* chosen, float* weights, const float* logits, const float* bias,
                                 int E, int k, MoeScore score) {
    moe_scores(scores, logits, E, score);
    moe_top_k(chosen, scores, bias, E, k);
    moe_combine_weights(weights, scores, chosen, k);
}

// dlogits (E) += the gradient through the weights' normalisation and the score function, from
// dweights (k); the header's formulas.
PARBENCH_HD void moe_weights_backward(float* dlogits, const float* dweights, const float* weights, const float* scores,
                                      const int* chosen, int k, MoeScore score) {
    float weighted = 0.0f;
    for (int i = 0; i < k; ++i) weighted += weights[i] * dweights[i];
    if (score == MoeScore::softmax) {
        for (int i = 0; i < k; ++i) dlogits[chosen[i]] += weights[i] * (dweights[i] - weighted);
        return;
    }
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += scores[chosen[i]];
    for (int i = 0; i < k; ++i) {
        const float s = scores[chosen[i]];
        dlogits[chosen[i]] += (dweights[i] - weighted) / sum * s * (1.0f - s);
    }
}

// The probabilities the load-balancing loss averages (Switch, arXiv 2101.03961 sec. 2.2: P_e):
// the softmax scores themselves, or the sigmoid scores normalised over all E experts (as
// DeepSeek-V3's sequence-wise balance loss, eq. 19, and Megatron-core do).
PARBENCH_HD void moe_balance_probabilities(float* probabilities, const float* scores, int E, MoeScore score) {
    if (score == MoeScore::softmax) {
        for (int e = 0; e < E; ++e) probabilities[e] = scores[e];
        return;
    }
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) sum += scores[e];
    for (int e = 0; e < E; ++e) probabilities[e] = scores[e] / sum;
}

// The balancing loss's per-expert coefficient c_e = balance_weight · d(L_aux / alpha)/d(P_te)
// = balance_weight · E · routed_e / (N² k), the same for every token of a group of N tokens
// (train/moe/router.hpp gives L_aux). Computed in double, rounded once.
PARBENCH_HD float moe_balance_coefficient(double balance_weight, int E, int routed, int N, int k) {
    return static_cast<float>(balance_weight * E * routed / (static_cast<double>(N) * N * k));
}

// dlogits (E) += the gradient of sum_e c_e P_e (c_e: the loss's per-expert coefficient, the
// same for every token of a group) through moe_balance_probabilities and the score function.
PARBENCH_HD void moe_balance_backward(float* dlogits, const float* coefficients, const float* scores, int E,
                                      MoeScore score) {
    if (score == MoeScore::softmax) {
        // d/dz_j sum_e c_e s_e = s_j (c_j - sum_e c_e s_e)
        float mean = 0.0f;
        for (int e = 0; e < E; ++e) mean += coefficients[e] * scores[e];
        for (int e = 0; e < E; ++e) dlogits[e] += scores[e] * (coefficients[e] - mean);
        return;
    }
    // P_e = s_e / S: dP/ds_j = (c_j - sum_e c_e P_e) / S, then ds_j/dz_j = s_j (1 - s_j).
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) sum += scores[e];
    float mean = 0.0f;
    for (int e = 0; e < E; ++e) mean += coefficients[e] * scores[e] / sum;
    for (int e = 0; e < E; ++e) dlogits[e] += (coefficients[e] - mean) / sum * scores[e] * (1.0f - scores[e]);
}

}  // namespace parbench

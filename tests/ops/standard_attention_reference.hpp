// What the block (FlashAttention-style) attention kernels are held to: the standard causal
// attention, its scores materialised, forward and backward on seeded inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "gradient_check.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench::testing_ops {

struct StandardAttention {
    std::vector<float> q, k, v, dout;  // the inputs, seeds first_seed .. first_seed + 3
    std::vector<float> out, preatt;    // the output and the scores before the softmax
    std::vector<float> dq, dk, dv;     // the gradients, accumulated onto prefilled()
};

inline StandardAttention standard_attention(CpuOps& ops, const GqaShape& s, std::uint32_t first_seed) {
    StandardAttention a{random_vector(s.q_elements(), first_seed),
                        random_vector(s.kv_elements(), first_seed + 1),
                        random_vector(s.kv_elements(), first_seed + 2),
                        random_vector(s.q_elements(), first_seed + 3),
                        std::vector<float>(s.q_elements()),
                        std::vector<float>(s.score_elements()),
                        prefilled(s.q_elements()),
                        prefilled(s.kv_elements()),
                        prefilled(s.kv_elements())};
    std::vector<float> att(s.score_elements()), dpreatt(s.score_elements()), datt(s.score_elements());
    ops.gqa_attention_forward(a.out.data(), a.preatt.data(), att.data(), a.q.data(), a.k.data(), a.v.data(), s);
    ops.gqa_attention_backward(a.dq.data(), a.dk.data(), a.dv.data(), dpreatt.data(), datt.data(), a.dout.data(),
                               a.q.data(), a.k.data(), a.v.data(), att.data(), s);
    return a;
}

}  // namespace parbench::testing_ops

// Grouped-query attention's shapes (Ainslie et al., arXiv 2305.13245): NH query heads share
// NKV key/value heads, each key/value head serving queries_per_kv consecutive query heads.
// Under tensor parallelism a rank holds NH/t query heads; it holds either its NKV/t key/value
// heads (when t divides NKV) or all NKV of them (replicated), and first_query_head says where
// its query heads start in the numbering that queries_per_kv groups:
//   kv head of local query head h = (first_query_head + h) / queries_per_kv
// q (B,T,NH*hs), k and v (B,T,NKV*hs), out (B,T,NH*hs); scores (B,NH,T,T); causal.
#pragma once

#include <cstddef>

#include "host_device.hpp"

namespace parbench {

struct GqaShape {
    int B = 1, T = 1;
    int NH = 1;   // query heads (this rank's)
    int NKV = 1;  // key/value heads in k and v
    int hs = 1;   // head size
    int first_query_head = 0;
    int queries_per_kv = 1;
    PARBENCH_HD int kv_head(int h) const { return (first_query_head + h) / queries_per_kv; }
    PARBENCH_HD std::size_t q_width() const { return static_cast<std::size_t>(NH) * hs; }
    PARBENCH_HD std::size_t kv_width() const { return static_cast<std::size_t>(NKV) * hs; }
    PARBENCH_HD std::size_t q_index(std::size_t b, std::size_t t, std::size_t h, int i) const {
        return (b * T + t) * q_width() + h * hs + i;
    }
    PARBENCH_HD std::size_t kv_index(std::size_t b, std::size_t t, std::size_t j, int i) const {
        return (b * T + t) * kv_width() + j * hs + i;
    }
    PARBENCH_HD std::size_t score_row(std::size_t b, std::size_t h, std::size_t t) const {
        return ((b * NH + h) * T + t) * T;
    }
    PARBENCH_HD std::size_t q_elements() const { return static_cast<std::size_t>(B) * T * q_width(); }
    PARBENCH_HD std::size_t kv_elements() const { return static_cast<std::size_t>(B) * T * kv_width(); }
    PARBENCH_HD std::size_t score_elements() const { return static_cast<std::size_t>(B) * NH * T * T; }
};

}  // namespace parbench

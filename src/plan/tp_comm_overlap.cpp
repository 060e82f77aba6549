#include "plan/tp_comm_overlap.hpp"

#include <algorithm>

namespace parbench {

double tp_overlap_exposed_ms(double gemm_ms, double comm_ms, int tp) {
    return std::max(0.0, comm_ms - gemm_ms) + std::min(gemm_ms, comm_ms) / std::max(1, tp);
}

double tp_overlap_step_exposed_ms(double gemm_ms, double comm_ms, double calls, int tp) {
    if (calls <= 0) return comm_ms;
    return calls * tp_overlap_exposed_ms(gemm_ms / calls, comm_ms / calls, tp);
}

}  // namespace parbench

#include "plan/tp_comm_overlap.hpp"

#include <algorithm>

namespace parbench {

double tp_overlap_allgather_exposed_ms(double gemm_ms, double comm_ms, int tp, const TpOverlapDevice& device) {
    if (tp <= 1) return comm_ms;
    const double chunk = gemm_ms / tp, step = comm_ms / (tp - 1);
    const double pair = chunk + (tp - 1) * std::max(chunk, step) + (tp - 1) * device.chunk_overhead_ms;
    return std::max(0.0, pair - gemm_ms);
}

double tp_overlap_reducescatter_exposed_ms(double gemm_ms, double comm_ms, int tp, const TpOverlapDevice& device) {
    if (tp <= 1) return comm_ms;
    const double margin = device.sms > te_pipeline_comm_sms ? device.sms / (device.sms - te_pipeline_comm_sms) : 1.0;
    const double splits = te_pipeline_splits;
    const double chunk = gemm_ms * margin / splits, step = comm_ms / splits;
    const double pair = chunk + (splits - 1) * std::max(chunk, step) + step + (splits - 1) * device.chunk_overhead_ms;
    return std::max(0.0, pair - gemm_ms);
}

double tp_overlap_step_exposed_ms(double gemm_ms, double ag_ms, double ag_calls, double rs_ms, double rs_calls, int tp,
                                  const TpOverlapDevice& device) {
    const double calls = ag_calls + rs_calls;
    if (calls <= 0) return ag_ms + rs_ms;
    const double per_gemm = gemm_ms / calls;
    double exposed = 0;
    if (ag_calls > 0) exposed += ag_calls * tp_overlap_allgather_exposed_ms(per_gemm, ag_ms / ag_calls, tp, device);
    if (rs_calls > 0) exposed += rs_calls * tp_overlap_reducescatter_exposed_ms(per_gemm, rs_ms / rs_calls, tp, device);
    return exposed;
}

}  // namespace parbench

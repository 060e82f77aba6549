#include "plan/tp_comm_overlap.hpp"

#include <algorithm>
#include <map>

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

double tp_overlap_bulk_exposed_ms(double gemm_ms, double comm_ms, const TpOverlapDevice& device) {
    const double margin = device.sms > te_pipeline_comm_sms ? device.sms / (device.sms - te_pipeline_comm_sms) : 1.0;
    return std::max(gemm_ms * margin, comm_ms) - gemm_ms;
}

std::optional<TeOverlap> te_overlap_of(const std::string& gemm_name) {
    // TE's names (qkv_fprop, ...) for theory/layer_work.cpp's GEMMs: "qkv" is the QKV linear,
    // "attention projection" proj, "mlp up" fc1 (SwiGLU's gate and up in one), "mlp down" fc2.
    static const std::map<std::string, TeOverlap> methods = {
        {"qkv", TeOverlap::ring_exchange},                        // qkv_fprop
        {"mlp up", TeOverlap::ring_exchange},                     // fc1_fprop
        {"attention projection dx", TeOverlap::ring_exchange},    // proj_dgrad
        {"mlp down dx", TeOverlap::ring_exchange},                // fc2_dgrad
        {"attention projection", TeOverlap::pipeline},            // proj_fprop
        {"mlp down", TeOverlap::pipeline},                        // fc2_fprop
        {"qkv dx", TeOverlap::bulk_all_gather},                   // qkv_dgrad
        {"mlp up dx", TeOverlap::bulk_all_gather},                // fc1_dgrad
        {"qkv dW", TeOverlap::bulk_reduce_scatter},               // qkv_wgrad
        {"mlp up dW", TeOverlap::bulk_reduce_scatter},            // fc1_wgrad
    };
    const auto found = methods.find(gemm_name);
    if (found == methods.end()) return std::nullopt;
    return found->second;
}

TpOverlapStep tp_overlap_step(const std::vector<TpOverlapGemm>& pairs, double ag_ms, double ag_calls, double rs_ms,
                              double rs_calls, int tp, const TpOverlapDevice& device) {
    const double ag_each = ag_calls > 0 ? ag_ms / ag_calls : 0.0, rs_each = rs_calls > 0 ? rs_ms / rs_calls : 0.0;
    double ag_left = ag_calls, rs_left = rs_calls;
    TpOverlapStep step;
    for (const TpOverlapGemm& pair : pairs) {
        const bool gathers = pair.method == TeOverlap::ring_exchange || pair.method == TeOverlap::bulk_all_gather;
        double& left = gathers ? ag_left : rs_left;
        const double n = std::min(pair.count, left);
        if (n <= 0) continue;
        left -= n;
        const double c = gathers ? ag_each : rs_each;
        double exposed = 0;
        switch (pair.method) {
            case TeOverlap::ring_exchange: exposed = tp_overlap_allgather_exposed_ms(pair.gemm_ms, c, tp, device); break;
            case TeOverlap::pipeline: exposed = tp_overlap_reducescatter_exposed_ms(pair.gemm_ms, c, tp, device); break;
            case TeOverlap::bulk_all_gather:
            case TeOverlap::bulk_reduce_scatter: exposed = tp_overlap_bulk_exposed_ms(pair.gemm_ms, c, device); break;
        }
        step.exposed_ms += n * exposed;
        if (pair.method != TeOverlap::ring_exchange) step.hidden_on_sms_ms += n * std::max(0.0, c - exposed);
    }
    step.exposed_ms += ag_left * ag_each + rs_left * rs_each;
    return step;
}

}  // namespace parbench

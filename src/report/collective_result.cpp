#include "report/collective_result.hpp"

namespace parbench {
namespace {

nlohmann::json optional_number(const std::optional<double>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

void derive_statistics(CollectiveResult& result) {
    result.time_us = summarize(result.samples_us);
    result.outliers = count_outliers(result.samples_us);
    result.warnings = sample_warnings(result.samples_us);
    // bytes per microsecond is MB/s; /1e3 gives decimal GB/s, as nccl-tests reports.
    result.algbw_gbps = result.time_us.median > 0.0 ? static_cast<double>(result.bytes) / result.time_us.median / 1e3 : 0.0;
    result.busbw_gbps = result.algbw_gbps * result.bus_factor;
}

nlohmann::json to_json(const CollectiveResult& result) {
    nlohmann::json entry = {
        {"collective", result.collective},
        {"bytes", result.bytes},
        {"requested_bytes", result.requested_bytes},
        {"count", result.count},
        {"dtype", dtype_name(result.dtype)},
        {"op", result.op ? nlohmann::json(reduce_op_name(*result.op)) : nlohmann::json(nullptr)},
        {"root", result.root ? nlohmann::json(*result.root) : nlohmann::json(nullptr)},
        {"inplace", result.inplace},
    };
    if (result.skipped) {
        entry["skipped"] = *result.skipped;
        return entry;
    }
    entry["time_us"] = {
        {"mean", result.time_us.mean},     {"median", result.time_us.median}, {"min", result.time_us.min},
        {"max", result.time_us.max},       {"p95", result.time_us.p95},
        {"stddev", optional_number(result.time_us.stddev)},
    };
    entry["samples_us"] = result.samples_us;
    entry["bus_factor"] = result.bus_factor;
    entry["algbw_gbps"] = result.algbw_gbps;
    entry["busbw_gbps"] = result.busbw_gbps;
    entry["wrong"] = result.wrong ? nlohmann::json(*result.wrong) : nlohmann::json(nullptr);
    entry["outliers"] = result.outliers;
    entry["warnings"] = result.warnings;
    return entry;
}

}  // namespace parbench

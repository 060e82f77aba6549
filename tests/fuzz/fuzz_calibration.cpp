// Fuzz target: plan's calibration readers on one document's text: --calibrate (a collective
// sweep, fitted to latency + size / bandwidth) and --calibrate-compute (a parbench-ops or train
// report). Either reader gives finite, positive figures or refuses with one UsageError naming the
// file and key (never a raw JSON exception, a crash, or a fit of 1e9 GB/s from a flat sweep).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "plan/alpha_beta.hpp"
#include "plan/compute_calibration.hpp"
#include "core/json_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace parbench;
    const std::string text(reinterpret_cast<const char*>(data), size);
    nlohmann::json document;
    try {
        document = parse_json_text(text, "fuzz.json");
    } catch (const UsageError&) {
        return 0;
    }
    try {
        for (const CollectiveFit& fit : fit_collective_documents({{"fuzz.json", document}}))
            if (!std::isfinite(fit.alpha_us) || fit.alpha_us < 0 || !std::isfinite(fit.busbw_gbps) ||
                !(fit.busbw_gbps > 0) || fit.sizes < 3 || fit.ranks < 2 || !std::isfinite(fit.median_abs_error))
                __builtin_trap();
    } catch (const UsageError&) {
    }
    try {
        ModelConfig model;
        model.name = "gpt-small";
        const ComputeRate rate = calibrate_compute_document(document, "fuzz.json", model);
        if (!std::isfinite(rate.tflops_per_gpu) || !(rate.tflops_per_gpu > 0) || rate.measured_cores < 0 ||
            (rate.optimizer_gbps && !(std::isfinite(*rate.optimizer_gbps) && *rate.optimizer_gbps > 0)))
            __builtin_trap();
        (void)to_json(rate).dump();
    } catch (const UsageError&) {
    }
    return 0;
}

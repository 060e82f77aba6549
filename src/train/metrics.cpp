#include "train/metrics.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <vector>

#include "theory/gpu_peaks.hpp"

namespace parbench {

std::optional<PeakFlops> known_gpu_peak(const std::string& device_name, const std::string& precision) {
    const GpuPeak* entry = find_gpu_peak(device_name);
    if (entry == nullptr) return std::nullopt;
    const bool bf16 = precision == "bf16";
    return PeakFlops{bf16 ? entry->bf16_tflops : entry->fp32_tflops,
                     std::string("table: ") + entry->label + (bf16 ? " bf16 dense" : " fp32")};
}

PeakFlops measure_cpu_sgemm_peak() {
    constexpr int n = 512;
    constexpr int runs = 5;
    std::vector<float> a(static_cast<std::size_t>(n) * n, 1.0f), b(a.size(), 0.5f), c(a.size(), 0.0f);
    double best_s = 1e30;
    for (int run = 0; run < runs + 1; ++run) {  // the first run is a warm-up
        const auto start = std::chrono::steady_clock::now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                    c.data(), n);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (run > 0) best_s = std::min(best_s, seconds);
    }
    const double tflops = 2.0 * n * n * static_cast<double>(n) / best_s / 1e12;
    std::ostringstream source;
    source << "measured: cblas_sgemm " << n << "^3, best of " << runs << ", on each rank at start-up";
    return PeakFlops{tflops, source.str()};
}

}  // namespace parbench

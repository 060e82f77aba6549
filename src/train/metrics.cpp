#include "train/metrics.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <vector>

namespace parbench {

std::optional<PeakFlops> known_gpu_peak(const std::string& device_name, const std::string& precision) {
    struct Entry {
        const char* name_part;
        const char* label;
        double bf16;
        double fp32;
    };
    // Dense (no sparsity) peaks from NVIDIA's data sheets; more specific names first.
    static constexpr Entry table[] = {
        {"H200", "H200", 989.0, 67.0},
        {"H100 PCIe", "H100 PCIe", 756.0, 51.0},
        {"H100", "H100 SXM", 989.0, 67.0},
        {"A100", "A100", 312.0, 19.5},
        {"L40S", "L40S", 362.0, 91.6},
        {"A10", "A10", 125.0, 31.2},
        {"V100", "V100 (fp16 tensor)", 125.0, 15.7},
    };
    for (const Entry& entry : table) {
        if (device_name.find(entry.name_part) == std::string::npos) continue;
        const bool bf16 = precision == "bf16";
        return PeakFlops{bf16 ? entry.bf16 : entry.fp32,
                         std::string("table: ") + entry.label + (bf16 ? " bf16 dense" : " fp32")};
    }
    return std::nullopt;
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

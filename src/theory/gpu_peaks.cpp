#include "theory/gpu_peaks.hpp"

namespace parbench {

const GpuPeak* find_gpu_peak(std::string_view device_name) {
    // FP8 dense: H100/H200 data sheet 3,958 TFLOPS with sparsity (1,979 dense); HGX B200 9 PFLOPS
    // with sparsity (4,500 dense).
    static constexpr GpuPeak table[] = {
        {"H200", "H200", 989.0, 67.0, 1979.0},
        {"H100 PCIe", "H100 PCIe", 756.0, 51.0, 0.0},
        {"H100", "H100 SXM", 989.0, 67.0, 1979.0},
        {"B200", "B200", 2250.0, 80.0, 4500.0},
        {"A100", "A100", 312.0, 19.5, 0.0},
        {"L40S", "L40S", 362.0, 91.6, 0.0},
        {"A10", "A10", 125.0, 31.2, 0.0},
        {"V100", "V100 (fp16 tensor)", 125.0, 15.7, 0.0},
    };
    for (const GpuPeak& entry : table)
        if (device_name.find(entry.name_part) != std::string_view::npos) return &entry;
    return nullptr;
}

}  // namespace parbench

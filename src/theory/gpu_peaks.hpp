// Dense (no sparsity) peak TFLOP/s per GPU from NVIDIA's data sheets, written once: the
// planner's device presets (plan/cluster.cpp) and train's MFU (train/metrics.cpp) read this
// table.
#pragma once

#include <string_view>

namespace parbench {

struct GpuPeak {
    const char* name_part;  // matched as a substring of the device's name
    const char* label;      // what a report names as the source
    double bf16_tflops;
    double fp32_tflops;
    double fp8_tflops;  // 0: no FP8 tensor cores (A100), or no figure taken here
};

// The first entry whose name_part occurs in `device_name` (more specific names come first:
// "H100 PCIe" before "H100", "A100" before "A10"), or nullptr.
const GpuPeak* find_gpu_peak(std::string_view device_name);

}  // namespace parbench

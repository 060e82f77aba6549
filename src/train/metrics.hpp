// The peak a training step's model FLOPs (theory/model_flops.hpp) are measured against: a
// data-sheet table for GPUs, a measured sgemm on CPUs.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "theory/model_flops.hpp"

namespace parbench {

struct PeakFlops {
    std::optional<double> tflops;  // per rank; absent when unknown
    std::string source;            // "--peak-tflops", "table: H100 SXM bf16", "measured sgemm ...", "unknown"
};

// Dense peak per GPU from the vendors' data sheets, by device-name substring and precision.
// fp32 means plain FP32 (no TF32), which is what fp32 training is measured against here.
std::optional<PeakFlops> known_gpu_peak(const std::string& device_name, const std::string& precision);
// Single-rank sgemm throughput on this CPU (best of several n x n x n runs): the attainable
// matmul peak a CPU run's MFU is taken against. Allocates and touches its matrices first.
PeakFlops measure_cpu_sgemm_peak();

}  // namespace parbench

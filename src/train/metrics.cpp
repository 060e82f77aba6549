#include "train/metrics.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <vector>

#include "plan/llama_formulas.hpp"

namespace parbench {

double megatron_gpt_flops(double batch, double seq, double layers, double hidden, double vocab) {
    return 72.0 * batch * seq * layers * hidden * hidden *
           (1.0 + seq / (6.0 * hidden) + vocab / (12.0 * layers * hidden));
}

double mlp_flops(double batch, double layers, double hidden) { return 6.0 * batch * layers * hidden * hidden; }

double model_flops_per_step(const ModelConfig& config, int global_batch, int seq_len) {
    if (config.kind == ModelKind::llama) return llama_model_flops(llama_shape(config), global_batch, seq_len);
    if (config.kind == ModelKind::gpt)
        return megatron_gpt_flops(global_batch, seq_len, config.layers, config.hidden, config.vocab);
    return mlp_flops(global_batch, config.layers, config.hidden);
}

std::string flops_formula(const ModelConfig& config) {
    if (config.kind == ModelKind::llama)
        return "6*B*s*(l*(2h^2 + 2h*h_kv + 3h*f) + h*V) + 12*B*l*s^2*h (Megatron-LM's convention, arXiv 2104.04473 "
               "sec. 5.1, for SwiGLU's three matrices and grouped-query K/V of width h_kv; no recompute; full s x s "
               "attention, no causal discount)";
    if (config.kind == ModelKind::gpt)
        return "72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) (Megatron-LM, arXiv 2104.04473 sec. 5.1, no recompute; "
               "full s x s attention, no causal discount)";
    return "6*B*l*h^2 (matmuls only: 2 forward + 4 backward per weight per sample)";
}

double recompute_flops_per_step(const ModelConfig& config, int global_batch, int seq_len, Recompute recompute) {
    if (recompute == Recompute::none || !config.has_sequence()) return 0.0;
    const double b = global_batch, s = seq_len, l = config.layers, h = config.hidden;
    const double core = 4.0 * b * l * s * s * h;
    if (recompute == Recompute::selective) return core;
    if (config.kind == ModelKind::llama) return llama_layers_forward_flops(llama_shape(config), b, s);
    return 24.0 * b * s * l * h * h + core;
}

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

TheoreticalMemory zero_theoretical_memory(std::size_t parameters, int dp, int zero_stage) {
    const double psi = static_cast<double>(parameters);
    const double ways = static_cast<double>(dp);
    TheoreticalMemory memory;
    memory.params = 4.0 * psi / (zero_stage >= 3 ? ways : 1.0);
    memory.grads = 4.0 * psi / (zero_stage >= 2 ? ways : 1.0);
    memory.optimizer = 8.0 * psi / (zero_stage >= 1 ? ways : 1.0);
    return memory;
}

}  // namespace parbench

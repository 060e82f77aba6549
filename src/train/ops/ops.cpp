#include "train/ops/ops.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "device/device.hpp"
#include "device/cuda_plugin.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cpu_simd.hpp"

namespace parbench {
namespace {

[[noreturn]] void throw_no_bf16(const Ops& ops) {
    throw UsageError("--precision bf16: the " + ops.name() + " ops compute in fp32 only (use --precision fp32)");
}

}  // namespace

CpuKernels CpuOps::widest_built() { return simd::widest_built; }

CpuOps::CpuOps(CpuGemm gemm) : CpuOps(choose_cpu_kernels().kernels, gemm) {}

CpuOps::CpuOps(CpuKernels kernels, CpuGemm gemm) : gemm_(gemm), kernels_(std::min(kernels, simd::widest_built)) {
    const std::vector<CpuKernels> runnable = cpu_kernels_runnable();
    if (std::find(runnable.begin(), runnable.end(), kernels_) == runnable.end())
        throw std::logic_error("CpuOps: this CPU cannot execute the " + std::string(cpu_kernels_name(kernels_)) +
                               " path (ask cpu_kernels_runnable())");
}

void Ops::cast_to_bf16(BFloat16*, const float*, std::size_t) { throw_no_bf16(*this); }

void Ops::matmul_forward_bf16(float*, const BFloat16*, const BFloat16*, const float*, int, int, int) {
    throw_no_bf16(*this);
}

void Ops::matmul_backward_bf16(float*, float*, float*, const BFloat16*, const BFloat16*, const BFloat16*, int, int,
                               int) {
    throw_no_bf16(*this);
}

void Ops::matmul_backward_bf16_overwrite_input(float* dinp, float* dweight, float* dbias, const BFloat16* dout,
                                               const BFloat16* inp, const BFloat16* weight, int N, int C, int OC) {
    if (!has_bf16()) throw_no_bf16(*this);
    if (dinp != nullptr) fill(dinp, 0.0f, static_cast<std::size_t>(N) * static_cast<std::size_t>(C));
    matmul_backward_bf16(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

void Ops::matmul_backward_overwrite_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                          const float* inp, const float* weight, int N, int C, int OC) {
    if (dinp != nullptr) fill(dinp, 0.0f, static_cast<std::size_t>(N) * static_cast<std::size_t>(C));
    matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

void Ops::matmul_weight_gradient_rows(float*, const float*, const float*, int, int, int, int, int) {
    throw std::logic_error("Ops::matmul_weight_gradient_rows: not available on " + name() +
                           " (ask has_weight_gradient_rows() first)");
}

void Ops::matmul_input_gradient_rows(float*, const float*, const float*, int, int, int, int, int, bool) {
    throw std::logic_error("Ops::matmul_input_gradient_rows: not available on " + name() +
                           " (ask has_weight_gradient_rows() first)");
}

void Ops::gelu_backward_overwrite(float* dinp, const float* inp, const float* dout, std::size_t n) {
    fill(dinp, 0.0f, n);
    gelu_backward(dinp, inp, dout, n);
}

void Ops::swiglu_backward_overwrite(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                    std::size_t n) {
    fill(dgate, 0.0f, n);
    fill(dup, 0.0f, n);
    swiglu_backward(dgate, dup, dout, gate, up, n);
}

void Ops::crossentropy_shard_backward_overwrite(float* dlogits, const float* dlosses, const float* logits,
                                                const float* maxes, const float* sums, const int* targets, int BT,
                                                int V, VocabShard shard) {
    fill(dlogits, 0.0f, static_cast<std::size_t>(BT) * static_cast<std::size_t>(V));
    crossentropy_shard_backward(dlogits, dlosses, logits, maxes, sums, targets, BT, V, shard);
}

void Ops::adamw_update_clearing_grads(float* params, float* grads, float* m, float* v, std::size_t n, float lr,
                                      float beta1, float beta2, float eps, float weight_decay, int step) {
    adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
    fill(grads, 0.0f, n);
}

double Ops::adamw_update_squares(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                                 float beta1, float beta2, float eps, float weight_decay, int step) {
    const double squares = sum_of_squares(grads, n);
    adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
    return squares;
}

double Ops::adamw_update_clearing_grads_squares(float* params, float* grads, float* m, float* v, std::size_t n,
                                                float lr, float beta1, float beta2, float eps, float weight_decay,
                                                int step) {
    const double squares = sum_of_squares(grads, n);
    adamw_update_clearing_grads(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
    return squares;
}

std::unique_ptr<Ops> make_ops(const Device& device) {
    if (device.kind() == "cpu") return std::make_unique<CpuOps>();
    // A CUDA device was made by the CUDA plugin, so it is loaded already.
    if (device.kind() == "cuda") {
        const CudaPlugin& plugin = cuda_plugin();
        if (plugin.entries != nullptr) return plugin.entries->make_cuda_ops(device);
        throw UsageError("no training ops for device kind 'cuda': " + plugin.unavailable_reason);
    }
    throw UsageError("no training ops for device kind '" + device.kind() + "' in this build");
}

}  // namespace parbench

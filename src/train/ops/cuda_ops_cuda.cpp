// CudaOps: cuBLAS for the GEMMs (device/cublas_handle.hpp), kernels/<family>.cu for everything
// else, all on the CudaDevice's stream.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>

#include "core/nvtx.hpp"
#include "core/error.hpp"
#include "device/cublas_handle.hpp"
#include "device/cuda_check.hpp"
#include "device/cuda_device.hpp"
#include "kernels/ops_launchers.hpp"
#include "kernels/softmax_math.hpp"
#include "train/ops/cuda_ops.hpp"

namespace parbench {
namespace {

const CudaDevice& as_cuda_device(const Device& device) {
    const auto* cuda = dynamic_cast<const CudaDevice*>(&device);
    if (cuda == nullptr) throw UsageError("CudaOps needs a CUDA device, got a '" + device.kind() + "' device");
    return *cuda;
}

}  // namespace

struct CudaOps::Resources {
    explicit Resources(const CudaDevice& cuda) : device(cuda), stream(cuda.shared_stream()), cublas(stream->get()) {}
    const CudaDevice& device;
    std::shared_ptr<CudaStream> stream;  // shared, so it outlives the handle bound to it
    CublasHandle cublas;
};

CudaOps::CudaOps(const Device& device) : resources_(std::make_unique<Resources>(as_cuda_device(device))) {}
CudaOps::~CudaOps() = default;

// Waits through the device, which also surfaces asynchronous NCCL errors instead of hanging.
void CudaOps::synchronize() { resources_->device.synchronize(); }

namespace {

// cuBLAS is column-major; a row-major (R,K) matrix is the column-major (K,R) matrix, its
// transpose. So the row-major product C = X · Y is computed as the column-major Cᵀ = Yᵀ Xᵀ,
// with no copies: each call below writes its row-major formula and the column-major one it
// runs. Accumulation is fp32 (CUBLAS_COMPUTE_32F, no TF32), matching the CPU's sgemm;
// elements are fp32 or bf16 as `element` says, and C is always fp32.
void gemm(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, const void* a,
          int lda, const void* b, int ldb, float beta, float* c, int ldc, cudaDataType_t element, const char* what) {
    const float alpha = 1.0f;
    check_cublas(cublasGemmEx(handle, op_a, op_b, m, n, k, &alpha, a, element, lda, b, element, ldb, &beta, c,
                              CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 what);
}

// out (N,OC) = inp (N,C) · weight (OC,C)ᵀ   <=>   outᵀ (OC,N) = weight (OC,C) · inpᵀ (C,N)
void linear_forward(cublasHandle_t handle, float* out, const void* inp, const void* weight, int N, int C, int OC,
                    cudaDataType_t element) {
    gemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, C, inp, C, 0.0f, out, OC, element,
         "cublasGemmEx (matmul forward)");
}

// dinp (N,C) = dinp_beta dinp + dout (N,OC) · weight (OC,C)
//     <=>   dinpᵀ (C,N) = dinp_beta dinpᵀ + weightᵀ (C,OC) · doutᵀ (OC,N)
// dweight (OC,C) += dout (N,OC)ᵀ · inp (N,C)   <=>   dweightᵀ (C,OC) += inpᵀ (C,N) · dout (N,OC)
// dinp_beta 1 accumulates; 0 is the first write, which cuBLAS does without reading dinp (so
// no fill(0) before it, and whatever dinp held, NaN included, does not matter).
void linear_backward(cublasHandle_t handle, float* dinp, float dinp_beta, float* dweight, const void* dout,
                     const void* inp, const void* weight, int N, int C, int OC, cudaDataType_t element) {
    if (dinp != nullptr)
        gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, C, dout, OC, dinp_beta, dinp, C, element,
             "cublasGemmEx (matmul backward, dinp)");
    if (dweight != nullptr)
        gemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, 1.0f, dweight, C, element,
             "cublasGemmEx (matmul backward, dweight)");
}

}  // namespace

void CudaOps::matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                             int OC) {
    NvtxRange range("matmul_forward");
    linear_forward(resources_->cublas.get(), out, inp, weight, N, C, OC, CUDA_R_32F);
    if (bias != nullptr) launch_add_bias(out, bias, N, OC, resources_->stream->get());
}

void CudaOps::matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                              const float* weight, int N, int C, int OC) {
    NvtxRange range("matmul_backward");
    linear_backward(resources_->cublas.get(), dinp, 1.0f, dweight, dout, inp, weight, N, C, OC, CUDA_R_32F);
    if (dbias != nullptr) launch_bias_backward(dbias, dout, N, OC, resources_->stream->get());
}

void CudaOps::matmul_backward_overwrite_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                              const float* inp, const float* weight, int N, int C, int OC) {
    NvtxRange range("matmul_backward_overwrite_input");
    linear_backward(resources_->cublas.get(), dinp, 0.0f, dweight, dout, inp, weight, N, C, OC, CUDA_R_32F);
    if (dbias != nullptr) launch_bias_backward(dbias, dout, N, OC, resources_->stream->get());
}

void CudaOps::cast_to_bf16(BFloat16* out, const float* inp, std::size_t n) {
    launch_cast_to_bf16(out, inp, n, resources_->stream->get());
}

void CudaOps::matmul_forward_bf16(float* out, const BFloat16* inp, const BFloat16* weight, const float* bias, int N,
                                  int C, int OC) {
    NvtxRange range("matmul_forward_bf16");
    linear_forward(resources_->cublas.get(), out, inp, weight, N, C, OC, CUDA_R_16BF);
    if (bias != nullptr) launch_add_bias(out, bias, N, OC, resources_->stream->get());
}

void CudaOps::matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const BFloat16* dout,
                                   const BFloat16* inp, const BFloat16* weight, int N, int C, int OC) {
    NvtxRange range("matmul_backward_bf16");
    linear_backward(resources_->cublas.get(), dinp, 1.0f, dweight, dout, inp, weight, N, C, OC, CUDA_R_16BF);
    if (dbias != nullptr) launch_bias_backward_bf16(dbias, dout, N, OC, resources_->stream->get());
}

void CudaOps::matmul_backward_bf16_overwrite_input(float* dinp, float* dweight, float* dbias, const BFloat16* dout,
                                                   const BFloat16* inp, const BFloat16* weight, int N, int C,
                                                   int OC) {
    NvtxRange range("matmul_backward_bf16_overwrite_input");
    linear_backward(resources_->cublas.get(), dinp, 0.0f, dweight, dout, inp, weight, N, C, OC, CUDA_R_16BF);
    if (dbias != nullptr) launch_bias_backward_bf16(dbias, dout, N, OC, resources_->stream->get());
}

void CudaOps::layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                const float* bias, int N, int C) {
    launch_layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, resources_->stream->get());
}

void CudaOps::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                 const float* weight, const float* mean, const float* rstd, int N, int C) {
    launch_layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, resources_->stream->get());
}

void CudaOps::gelu_forward(float* out, const float* inp, std::size_t n) {
    launch_gelu_forward(out, inp, n, resources_->stream->get());
}

void CudaOps::gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
    launch_gelu_backward(dinp, inp, dout, n, GradientWrite::accumulate, resources_->stream->get());
}

void CudaOps::gelu_backward_overwrite(float* dinp, const float* inp, const float* dout, std::size_t n) {
    launch_gelu_backward(dinp, inp, dout, n, GradientWrite::overwrite, resources_->stream->get());
}

void CudaOps::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                              float eps) {
    launch_rmsnorm_forward(out, rstd, inp, weight, N, C, eps, resources_->stream->get());
}

void CudaOps::rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                               const float* rstd, int N, int C) {
    launch_rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C, resources_->stream->get());
}

void CudaOps::swiglu_forward(float* out, const float* gate, const float* up, std::size_t n) {
    launch_swiglu_forward(out, gate, up, n, resources_->stream->get());
}

void CudaOps::swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                              std::size_t n) {
    launch_swiglu_backward(dgate, dup, dout, gate, up, n, GradientWrite::accumulate, resources_->stream->get());
}

void CudaOps::swiglu_backward_overwrite(float* dgate, float* dup, const float* dout, const float* gate,
                                        const float* up, std::size_t n) {
    launch_swiglu_backward(dgate, dup, dout, gate, up, n, GradientWrite::overwrite, resources_->stream->get());
}

void CudaOps::rope_forward(float* x, const int* positions, int B, int T, int H, int hs, float theta) {
    launch_rope_forward(x, positions, B, T, H, hs, theta, resources_->stream->get());
}

void CudaOps::rope_backward(float* dx, const int* positions, int B, int T, int H, int hs, float theta) {
    launch_rope_backward(dx, positions, B, T, H, hs, theta, resources_->stream->get());
}

void CudaOps::gqa_attention_forward(float* out, float* preatt, float* att, const float* q, const float* k,
                                    const float* v, const GqaShape& shape) {
    launch_gqa_attention_forward(out, preatt, att, q, k, v, shape, resources_->stream->get());
}

void CudaOps::gqa_attention_backward(float* dq, float* dk, float* dv, float* dpreatt, float* datt, const float* dout,
                                     const float* q, const float* k, const float* v, const float* att,
                                     const GqaShape& shape) {
    launch_gqa_attention_backward(dq, dk, dv, dpreatt, datt, dout, q, k, v, att, shape, resources_->stream->get());
}

void CudaOps::block_attention_forward(float* part_out, float* part_max, float* part_sum, float* scores,
                                      const float* q, const float* k, const float* v, const AttentionBlock& block) {
    launch_block_attention_forward(part_out, part_max, part_sum, scores, q, k, v, block, resources_->stream->get());
}

void CudaOps::block_attention_merge(float* out, float* row_max, float* row_sum, const float* part_out,
                                    const float* part_max, const float* part_sum, const AttentionBlock& block) {
    launch_block_attention_merge(out, row_max, row_sum, part_out, part_max, part_sum, block,
                                 resources_->stream->get());
}

void CudaOps::block_attention_finish(float* out, float* lse, const float* row_max, const float* row_sum,
                                     std::size_t rows, int hs) {
    launch_block_attention_finish(out, lse, row_max, row_sum, rows, hs, resources_->stream->get());
}

void CudaOps::block_attention_delta(float* delta, const float* dout, const float* out, std::size_t rows, int hs) {
    launch_block_attention_delta(delta, dout, out, rows, hs, resources_->stream->get());
}

void CudaOps::block_attention_backward(float* dq, float* dk, float* dv, float* scratch, const float* dout,
                                       const float* q, const float* k, const float* v, const float* lse,
                                       const float* delta, const AttentionBlock& block) {
    launch_block_attention_backward(dq, dk, dv, scratch, dout, q, k, v, lse, delta, block,
                                    resources_->stream->get());
}

void CudaOps::copy_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch,
                        std::size_t width, std::size_t rows) {
    launch_copy_rows(dst, dst_pitch, src, src_pitch, width, rows, resources_->stream->get());
}

void CudaOps::add_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch, std::size_t width,
                       std::size_t rows) {
    launch_add_rows(dst, dst_pitch, src, src_pitch, width, rows, resources_->stream->get());
}

namespace {

// One GEMM per head of a sequence, the heads a batch of cuBLAS (strided by hs in qkv and out,
// by T x T in the scores), fp32 throughout like gemm() above. Column-major as gemm() says:
// a row-major (T, hs) head slice with row pitch ld is the column-major (hs, T) matrix, ld ld.
struct HeadGemm {
    cublasOperation_t op_a, op_b;
    int m, n, k;
    const float* a;
    int lda;
    long long stride_a;
    const float* b;
    int ldb;
    long long stride_b;
    float* c;
    int ldc;
    long long stride_c;
};

// Where sequence b's pieces start: its q | k | v rows in qkv (and dqkv), its rows of out and
// dout, its heads' (T, T) scores.
struct AttentionSlices {
    int T, C, NH;
    int hs = C / NH;
    int row = 3 * C;  // qkv's row pitch
    long long square = static_cast<long long>(T) * T;
    std::size_t qkv(int b) const { return static_cast<std::size_t>(b) * T * row; }
    std::size_t rows(int b) const { return static_cast<std::size_t>(b) * T * C; }
    std::size_t scores(int b) const { return static_cast<std::size_t>(b) * NH * static_cast<std::size_t>(square); }
};

void head_gemms(cublasHandle_t handle, const HeadGemm& g, float alpha, float beta, int heads, const char* what) {
    check_cublas(cublasGemmStridedBatchedEx(handle, g.op_a, g.op_b, g.m, g.n, g.k, &alpha, g.a, CUDA_R_32F, g.lda,
                                            g.stride_a, g.b, CUDA_R_32F, g.ldb, g.stride_b, &beta, g.c, CUDA_R_32F,
                                            g.ldc, g.stride_c, heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 what);
}

}  // namespace

// Standard attention as GEMMs, the way an unfused training job runs it (llm.c's attention
// without cuDNN, PyTorch's math attention): per sequence b and head h, with row-major slices
// Q, K, V, Y, dY of (T, hs) and scores of (T, T),
//   S = scale Q Kᵀ,  P = causal softmax(S),  Y = P V                (forward)
//   dP = dY Vᵀ,  dS = P ∘ (dP - rowsum(P ∘ dP)),  dV += Pᵀ dY,  dQ += scale dS K,  dK += scale dSᵀ Q
// The GEMMs run over the full T x T square (twice the causal work; the masked half of P and
// dS is 0, so it adds nothing), which is what lets every head of a sequence be one batched
// call. Column-major, each becomes (Q Kᵀ)ᵀ = K Qᵀ and so on below.
void CudaOps::attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C,
                                int NH) {
    NvtxRange range("attention_forward");
    const AttentionSlices x{T, C, NH};
    cublasHandle_t handle = resources_->cublas.get();
    for (int b = 0; b < B; ++b) {
        const float* q = qkv + x.qkv(b);
        // Sᵀ (T, T) = K Qᵀ
        head_gemms(handle, {CUBLAS_OP_T, CUBLAS_OP_N, T, T, x.hs, q + C, x.row, x.hs, q, x.row, x.hs,
                            preatt + x.scores(b), T, x.square},
                   attention_scale(x.hs), 0.0f, NH, "cublasGemmStridedBatchedEx (attention scores)");
    }
    launch_attention_softmax(att, preatt, B, NH, T, resources_->stream->get());
    for (int b = 0; b < B; ++b)  // Yᵀ (hs, T) = Vᵀ Pᵀ
        head_gemms(handle, {CUBLAS_OP_N, CUBLAS_OP_N, x.hs, T, T, qkv + x.qkv(b) + 2 * C, x.row, x.hs,
                            att + x.scores(b), T, x.square, out + x.rows(b), C, x.hs},
                   1.0f, 0.0f, NH, "cublasGemmStridedBatchedEx (attention values)");
}

void CudaOps::attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                                 const float* att, int B, int T, int C, int NH) {
    NvtxRange range("attention_backward");
    const AttentionSlices x{T, C, NH};
    const float scale = attention_scale(x.hs);
    cublasHandle_t handle = resources_->cublas.get();
    for (int b = 0; b < B; ++b)  // dPᵀ (T, T) = V dYᵀ
        head_gemms(handle, {CUBLAS_OP_T, CUBLAS_OP_N, T, T, x.hs, qkv + x.qkv(b) + 2 * C, x.row, x.hs,
                            dout + x.rows(b), C, x.hs, datt + x.scores(b), T, x.square},
                   1.0f, 0.0f, NH, "cublasGemmStridedBatchedEx (attention probability gradients)");
    launch_attention_softmax_backward(dpreatt, datt, att, B, NH, T, resources_->stream->get());
    for (int b = 0; b < B; ++b) {
        const float* q = qkv + x.qkv(b);
        float* dq = dqkv + x.qkv(b);
        const float* dy = dout + x.rows(b);
        const float* p = att + x.scores(b);
        const float* ds = dpreatt + x.scores(b);
        // dVᵀ (hs, T) += dYᵀ P;  dQᵀ (hs, T) += scale Kᵀ dSᵀ;  dKᵀ (hs, T) += scale Qᵀ dS
        head_gemms(handle, {CUBLAS_OP_N, CUBLAS_OP_T, x.hs, T, T, dy, C, x.hs, p, T, x.square, dq + 2 * C, x.row, x.hs},
                   1.0f, 1.0f, NH, "cublasGemmStridedBatchedEx (attention dV)");
        head_gemms(handle, {CUBLAS_OP_N, CUBLAS_OP_N, x.hs, T, T, q + C, x.row, x.hs, ds, T, x.square, dq, x.row, x.hs},
                   scale, 1.0f, NH, "cublasGemmStridedBatchedEx (attention dQ)");
        head_gemms(handle, {CUBLAS_OP_N, CUBLAS_OP_T, x.hs, T, T, q, x.row, x.hs, ds, T, x.square, dq + C, x.row, x.hs},
                   scale, 1.0f, NH, "cublasGemmStridedBatchedEx (attention dK)");
    }
}

void CudaOps::encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C,
                              VocabShard shard) {
    launch_encoder_forward(out, tokens, wte, wpe, B, T, C, shard.start, shard.size, resources_->stream->get());
}

void CudaOps::encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C,
                               VocabShard shard) {
    launch_encoder_backward(dwte, dwpe, dout, tokens, B, T, C, shard.start, shard.size, resources_->stream->get());
}

void CudaOps::residual_forward(float* out, const float* a, const float* b, std::size_t n) {
    launch_residual_forward(out, a, b, n, resources_->stream->get());
}

void CudaOps::add_inplace(float* acc, const float* x, std::size_t n) {
    launch_add_inplace(acc, x, n, resources_->stream->get());
}

void CudaOps::scale(float* x, float factor, std::size_t n) { launch_scale(x, factor, n, resources_->stream->get()); }

void CudaOps::fill(float* x, float value, std::size_t n) { launch_fill(x, value, n, resources_->stream->get()); }

// cuBLAS's nrm2 on the ops' stream (its result to the host: the call waits for it), in pieces
// of at most INT_MAX elements, cuBLAS's count type.
double CudaOps::sum_of_squares(const float* x, std::size_t n) {
    constexpr std::size_t piece = static_cast<std::size_t>(std::numeric_limits<int>::max());
    double sum = 0.0;
    for (std::size_t begin = 0; begin < n; begin += piece) {
        float norm = 0.0f;
        check_cublas(cublasSnrm2(resources_->cublas.get(), static_cast<int>(std::min(piece, n - begin)), x + begin, 1,
                                 &norm),
                     "cublasSnrm2");
        sum += static_cast<double>(norm) * static_cast<double>(norm);
    }
    return sum;
}

void CudaOps::crossentropy_forward(float* losses, float* probs, const float* logits, const int* targets, int BT,
                                   int V) {
    launch_crossentropy_forward(losses, probs, logits, targets, BT, V, resources_->stream->get());
}

void CudaOps::crossentropy_backward(float* dlogits, const float* dlosses, const float* probs, const int* targets,
                                    int BT, int V) {
    launch_crossentropy_backward(dlogits, dlosses, probs, targets, BT, V, resources_->stream->get());
}

void CudaOps::row_max(float* maxes, const float* logits, int BT, int V) {
    launch_row_max(maxes, logits, BT, V, resources_->stream->get());
}

void CudaOps::row_sum_exp(float* sums, const float* logits, const float* maxes, int BT, int V) {
    launch_row_sum_exp(sums, logits, maxes, BT, V, resources_->stream->get());
}

void CudaOps::target_logit(float* out, const float* logits, const int* targets, int BT, int V, VocabShard shard) {
    launch_target_logit(out, logits, targets, BT, V, shard.start, resources_->stream->get());
}

void CudaOps::crossentropy_losses_from_parts(float* losses, const float* maxes, const float* sums,
                                             const float* target_logits, int BT) {
    launch_crossentropy_losses_from_parts(losses, maxes, sums, target_logits, BT, resources_->stream->get());
}

void CudaOps::crossentropy_shard_backward(float* dlogits, const float* dlosses, const float* logits,
                                          const float* maxes, const float* sums, const int* targets, int BT, int V,
                                          VocabShard shard) {
    launch_crossentropy_shard_backward(dlogits, dlosses, logits, maxes, sums, targets, BT, V, shard.start,
                                       GradientWrite::accumulate, resources_->stream->get());
}

void CudaOps::crossentropy_shard_backward_overwrite(float* dlogits, const float* dlosses, const float* logits,
                                                    const float* maxes, const float* sums, const int* targets,
                                                    int BT, int V, VocabShard shard) {
    launch_crossentropy_shard_backward(dlogits, dlosses, logits, maxes, sums, targets, BT, V, shard.start,
                                       GradientWrite::overwrite, resources_->stream->get());
}

void CudaOps::moe_route(float* scores, int* chosen, float* weights, const float* logits, const float* bias, int N,
                        int E, int k, MoeScore score) {
    launch_moe_route(scores, chosen, weights, logits, bias, N, E, k, score, resources_->stream->get());
}

void CudaOps::moe_dispatch(float* dispatched, const float* x, const int* slot, int N, int k, int C) {
    launch_moe_dispatch(dispatched, x, slot, N, k, C, resources_->stream->get());
}

void CudaOps::moe_combine(float* out, const float* expert_out, const int* slot, const float* weights, int N, int k,
                          int C) {
    launch_moe_combine(out, expert_out, slot, weights, N, k, C, resources_->stream->get());
}

void CudaOps::moe_combine_backward(float* dexpert_out, float* dweights, const float* dout, const float* expert_out,
                                   const int* slot, const float* weights, int N, int k, int C) {
    launch_moe_combine_backward(dexpert_out, dweights, dout, expert_out, slot, weights, N, k, C,
                                resources_->stream->get());
}

void CudaOps::moe_dispatch_backward(float* dx, const float* ddispatched, const int* slot, int N, int k, int C) {
    launch_moe_dispatch_backward(dx, ddispatched, slot, N, k, C, resources_->stream->get());
}

void CudaOps::moe_route_backward(float* dlogits, const float* dweights, const float* scores, const float* weights,
                                 const int* chosen, const int* routed, double balance_weight, int N, int E, int k,
                                 MoeScore score) {
    launch_moe_route_backward(dlogits, dweights, scores, weights, chosen, routed, balance_weight, N, E, k, score,
                              resources_->stream->get());
}

// On the ops' stream, after the ops issued before; the host then waits for it (the sync an MoE
// layer's routing needs, train/moe/moe_layer.hpp).
void CudaOps::copy_to_host(void* host, const void* source, std::size_t bytes) {
    if (bytes == 0) return;
    const cudaStream_t stream = resources_->stream->get();
    check_cuda(cudaMemcpyAsync(host, source, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync (to host)");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (after a copy to host)");
}

// From pageable host memory, cudaMemcpyAsync returns once the source has been staged, so the
// caller may reuse `host` at once; the copy itself runs in stream order.
void CudaOps::copy_from_host(void* target, const void* host, std::size_t bytes) {
    if (bytes == 0) return;
    check_cuda(cudaMemcpyAsync(target, host, bytes, cudaMemcpyHostToDevice, resources_->stream->get()),
               "cudaMemcpyAsync (from host)");
}

void CudaOps::mse_forward(float* losses, const float* pred, const float* target, int N, int D) {
    launch_mse_forward(losses, pred, target, N, D, resources_->stream->get());
}

void CudaOps::mse_backward(float* dpred, const float* dlosses, const float* pred, const float* target, int N, int D) {
    launch_mse_backward(dpred, dlosses, pred, target, N, D, resources_->stream->get());
}

void CudaOps::adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                           float beta1, float beta2, float eps, float weight_decay, int step) {
    launch_adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step, resources_->stream->get());
}

void CudaOps::adamw_update_clearing_grads(float* params, float* grads, float* m, float* v, std::size_t n, float lr,
                                          float beta1, float beta2, float eps, float weight_decay, int step) {
    launch_adamw_update_clearing_grads(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step,
                                       resources_->stream->get());
}

}  // namespace parbench

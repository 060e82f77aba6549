// Host launchers of the training-op kernels (kernels/<family>.cu), called by CudaOps. Shapes
// and the += convention are those of src/train/ops/ops.hpp; a launcher taking a GradientWrite
// also has the first-write (=) form of Ops' "first writes". Every launcher enqueues on
// `stream`, checks the launch and returns without waiting. No CUDA header here: the stream is
// the opaque CUstream_st* that cudaStream_t is.
#pragma once

#include <cstddef>

#include "kernels/block_attention_math.hpp"
#include "kernels/gqa_math.hpp"
#include "kernels/gradient_write_math.hpp"
#include "kernels/half_types.hpp"
#include "kernels/moe_router_math.hpp"

struct CUstream_st;

namespace parbench {

using GpuStream = CUstream_st*;

// matmul.cu: the parts of a linear layer that are not the GEMM itself
void launch_add_bias(float* out, const float* bias, int N, int OC, GpuStream stream);                  // out (N,OC)
void launch_bias_backward(float* dbias, const float* dout, int N, int OC, GpuStream stream);           // +=
void launch_bias_backward_bf16(float* dbias, const BFloat16* dout, int N, int OC, GpuStream stream);  // +=
void launch_cast_to_bf16(BFloat16* out, const float* inp, std::size_t n, GpuStream stream);

// layernorm.cu
void launch_layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                              const float* bias, int N, int C, GpuStream stream);
void launch_layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                               const float* weight, const float* mean, const float* rstd, int N, int C,
                               GpuStream stream);

// gelu.cu
void launch_gelu_forward(float* out, const float* inp, std::size_t n, GpuStream stream);
void launch_gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n, GradientWrite write,
                          GpuStream stream);

// attention.cu: the softmax between CudaOps' attention GEMMs, over (B, NH, T, T) scores
void launch_attention_softmax(float* att, float* preatt, int B, int NH, int T, GpuStream stream);
void launch_attention_softmax_backward(float* dpreatt, const float* datt, const float* att, int B, int NH, int T,
                                       GpuStream stream);

// rmsnorm.cu, swiglu.cu, rope.cu, gqa_attention.cu: Llama's ops
void launch_rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                            GpuStream stream);
void launch_rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                             const float* rstd, int N, int C, GpuStream stream);
void launch_swiglu_forward(float* out, const float* gate, const float* up, std::size_t n, GpuStream stream);
void launch_swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                            std::size_t n, GradientWrite write, GpuStream stream);
void launch_rope_forward(float* x, const int* positions, int B, int T, int H, int hs, float theta, GpuStream stream);
void launch_rope_backward(float* dx, const int* positions, int B, int T, int H, int hs, float theta,
                          GpuStream stream);
void launch_gqa_attention_forward(float* out, float* preatt, float* att, const float* q, const float* k,
                                  const float* v, const GqaShape& shape, GpuStream stream);
void launch_gqa_attention_backward(float* dq, float* dk, float* dv, float* dpreatt, float* datt, const float* dout,
                                   const float* q, const float* k, const float* v, const float* att,
                                   const GqaShape& shape, GpuStream stream);

// block_attention.cu: ring attention's blockwise pieces
void launch_block_attention_forward(float* part_out, float* part_max, float* part_sum, float* scores, const float* q,
                                    const float* k, const float* v, const AttentionBlock& block, GpuStream stream);
void launch_block_attention_merge(float* out, float* row_max, float* row_sum, const float* part_out,
                                  const float* part_max, const float* part_sum, const AttentionBlock& block,
                                  GpuStream stream);
void launch_block_attention_finish(float* out, float* lse, const float* row_max, const float* row_sum,
                                   std::size_t rows, int hs, GpuStream stream);
void launch_block_attention_delta(float* delta, const float* dout, const float* out, std::size_t rows, int hs,
                                  GpuStream stream);
void launch_block_attention_backward(float* dq, float* dk, float* dv, float* scratch, const float* dout,
                                     const float* q, const float* k, const float* v, const float* lse,
                                     const float* delta, const AttentionBlock& block, GpuStream stream);

// strided_rows.cu; pitches and width in floats
void launch_copy_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch, std::size_t width,
                      std::size_t rows, GpuStream stream);
void launch_add_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch, std::size_t width,
                     std::size_t rows, GpuStream stream);

// encoder.cu; the shard is [vocab_start, vocab_start + vocab_size)
void launch_encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C,
                            int vocab_start, int vocab_size, GpuStream stream);
void launch_encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C,
                             int vocab_start, int vocab_size, GpuStream stream);

// elementwise.cu
void launch_residual_forward(float* out, const float* a, const float* b, std::size_t n, GpuStream stream);
void launch_add_inplace(float* acc, const float* x, std::size_t n, GpuStream stream);
void launch_scale(float* x, float factor, std::size_t n, GpuStream stream);
void launch_fill(float* x, float value, std::size_t n, GpuStream stream);

// crossentropy.cu
void launch_crossentropy_forward(float* losses, float* probs, const float* logits, const int* targets, int BT, int V,
                                 GpuStream stream);
void launch_crossentropy_backward(float* dlogits, const float* dlosses, const float* probs, const int* targets,
                                  int BT, int V, GpuStream stream);
void launch_row_max(float* maxes, const float* logits, int BT, int V, GpuStream stream);
void launch_row_sum_exp(float* sums, const float* logits, const float* maxes, int BT, int V, GpuStream stream);
void launch_target_logit(float* out, const float* logits, const int* targets, int BT, int V, int vocab_start,
                         GpuStream stream);
void launch_crossentropy_losses_from_parts(float* losses, const float* maxes, const float* sums,
                                           const float* target_logits, int BT, GpuStream stream);
void launch_crossentropy_shard_backward(float* dlogits, const float* dlosses, const float* logits,
                                        const float* maxes, const float* sums, const int* targets, int BT, int V,
                                        int vocab_start, GradientWrite write, GpuStream stream);

// mse.cu
void launch_mse_forward(float* losses, const float* pred, const float* target, int N, int D, GpuStream stream);
void launch_mse_backward(float* dpred, const float* dlosses, const float* pred, const float* target, int N, int D,
                         GpuStream stream);

// moe.cu: a mixture-of-experts layer's routing, permutation and combine
void launch_moe_route(float* scores, int* chosen, float* weights, const float* logits, const float* bias, int N, int E,
                      int k, MoeScore score, GpuStream stream);
void launch_moe_dispatch(float* dispatched, const float* x, const int* slot, int N, int k, int C, GpuStream stream);
void launch_moe_combine(float* out, const float* expert_out, const int* slot, const float* weights, int N, int k, int C,
                        GpuStream stream);
void launch_moe_combine_backward(float* dexpert_out, float* dweights, const float* dout, const float* expert_out,
                                 const int* slot, const float* weights, int N, int k, int C, GpuStream stream);
void launch_moe_dispatch_backward(float* dx, const float* ddispatched, const int* slot, int N, int k, int C,
                                  GpuStream stream);
void launch_moe_route_backward(float* dlogits, const float* dweights, const float* scores, const float* weights,
                               const int* chosen, const int* routed, double balance_weight, int N, int E, int k,
                               MoeScore score, GpuStream stream);

// adamw.cu
void launch_adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr, float beta1,
                         float beta2, float eps, float weight_decay, int step, GpuStream stream);
// adamw_update, then grads (n) = 0, in the same pass
void launch_adamw_update_clearing_grads(float* params, float* grads, float* m, float* v, std::size_t n, float lr,
                                        float beta1, float beta2, float eps, float weight_decay, int step,
                                        GpuStream stream);

}  // namespace parbench

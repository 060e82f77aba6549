// The operators on one GPU: kernels of kernels/<family>.cu and cuBLAS GEMMs, all enqueued on
// the CudaDevice's stream in call order. No CUDA types here (the handles live behind a
// pointer), so CPU-only code may include this header.
#pragma once

#include <memory>

#include "train/ops/ops.hpp"

namespace parbench {

class CudaOps : public Ops {
  public:
    // `device` must be a CudaDevice and outlive the ops; its stream and GPU serve every op.
    explicit CudaOps(const Device& device);
    ~CudaOps() override;
    CudaOps(const CudaOps&) = delete;
    CudaOps& operator=(const CudaOps&) = delete;

    using Ops::encoder_backward;
    using Ops::encoder_forward;

    std::string name() const override { return "cuda"; }
    bool tiles_block_attention() const override { return false; }
    std::size_t block_attention_scratch_floats(const AttentionBlock& block) const override {
        return 2 * block.tile_elements();
    }
    void synchronize() override;

    void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                        int OC) override;
    void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                         const float* weight, int N, int C, int OC) override;

    void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                           const float* bias, int N, int C) override;
    void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                            const float* weight, const float* mean, const float* rstd, int N, int C) override;

    void gelu_forward(float* out, const float* inp, std::size_t n) override;
    void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) override;

    void attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C,
                           int NH) override;
    void attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                            const float* att, int B, int T, int C, int NH) override;

    void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                         float eps) override;
    void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                          const float* rstd, int N, int C) override;
    void swiglu_forward(float* out, const float* gate, const float* up, std::size_t n) override;
    void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                         std::size_t n) override;
    void rope_forward(float* x, const int* positions, int B, int T, int H, int hs, float theta) override;
    void rope_backward(float* dx, const int* positions, int B, int T, int H, int hs, float theta) override;
    void gqa_attention_forward(float* out, float* preatt, float* att, const float* q, const float* k, const float* v,
                               const GqaShape& shape) override;
    void gqa_attention_backward(float* dq, float* dk, float* dv, float* dpreatt, float* datt, const float* dout,
                                const float* q, const float* k, const float* v, const float* att,
                                const GqaShape& shape) override;

    void block_attention_forward(float* part_out, float* part_max, float* part_sum, float* scores, const float* q,
                                 const float* k, const float* v, const AttentionBlock& block) override;
    void block_attention_merge(float* out, float* row_max, float* row_sum, const float* part_out,
                               const float* part_max, const float* part_sum, const AttentionBlock& block) override;
    void block_attention_finish(float* out, float* lse, const float* row_max, const float* row_sum, std::size_t rows,
                                int hs) override;
    void block_attention_delta(float* delta, const float* dout, const float* out, std::size_t rows,
                               int hs) override;
    void block_attention_backward(float* dq, float* dk, float* dv, float* scratch, const float* dout, const float* q,
                                  const float* k, const float* v, const float* lse, const float* delta,
                                  const AttentionBlock& block) override;
    void copy_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch, std::size_t width,
                   std::size_t rows) override;
    void add_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch, std::size_t width,
                  std::size_t rows) override;

    void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C,
                         VocabShard shard) override;
    void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C,
                          VocabShard shard) override;

    void residual_forward(float* out, const float* a, const float* b, std::size_t n) override;
    void add_inplace(float* acc, const float* x, std::size_t n) override;
    void scale(float* x, float factor, std::size_t n) override;
    void fill(float* x, float value, std::size_t n) override;
    double sum_of_squares(const float* x, std::size_t n) override;

    void crossentropy_forward(float* losses, float* probs, const float* logits, const int* targets, int BT,
                              int V) override;
    void crossentropy_backward(float* dlogits, const float* dlosses, const float* probs, const int* targets, int BT,
                               int V) override;
    void row_max(float* maxes, const float* logits, int BT, int V) override;
    void row_sum_exp(float* sums, const float* logits, const float* maxes, int BT, int V) override;
    void target_logit(float* out, const float* logits, const int* targets, int BT, int V, VocabShard shard) override;
    void crossentropy_losses_from_parts(float* losses, const float* maxes, const float* sums,
                                        const float* target_logits, int BT) override;
    void crossentropy_shard_backward(float* dlogits, const float* dlosses, const float* logits, const float* maxes,
                                     const float* sums, const int* targets, int BT, int V,
                                     VocabShard shard) override;

    void moe_route(float* scores, int* chosen, float* weights, const float* logits, const float* bias, int N, int E,
                   int k, MoeScore score) override;
    void moe_dispatch(float* dispatched, const float* x, const int* slot, int N, int k, int C) override;
    void moe_combine(float* out, const float* expert_out, const int* slot, const float* weights, int N, int k,
                     int C) override;
    void moe_combine_backward(float* dexpert_out, float* dweights, const float* dout, const float* expert_out,
                              const int* slot, const float* weights, int N, int k, int C) override;
    void moe_dispatch_backward(float* dx, const float* ddispatched, const int* slot, int N, int k, int C) override;
    void moe_route_backward(float* dlogits, const float* dweights, const float* scores, const float* weights,
                            const int* chosen, const int* routed, double balance_weight, int N, int E, int k,
                            MoeScore score) override;
    void copy_to_host(void* host, const void* source, std::size_t bytes) override;
    void copy_from_host(void* target, const void* host, std::size_t bytes) override;

    void mse_forward(float* losses, const float* pred, const float* target, int N, int D) override;
    void mse_backward(float* dpred, const float* dlosses, const float* pred, const float* target, int N,
                      int D) override;

    void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int step) override;
    void adamw_update_clearing_grads(float* params, float* grads, float* m, float* v, std::size_t n, float lr,
                                     float beta1, float beta2, float eps, float weight_decay, int step) override;

    // First writes (Ops): cuBLAS with beta 0 and the backward kernels' "=" forms, so no
    // fill(0) pass precedes them.
    void matmul_backward_overwrite_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                         const float* inp, const float* weight, int N, int C, int OC) override;
    void gelu_backward_overwrite(float* dinp, const float* inp, const float* dout, std::size_t n) override;
    void swiglu_backward_overwrite(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                   std::size_t n) override;
    void crossentropy_shard_backward_overwrite(float* dlogits, const float* dlosses, const float* logits,
                                               const float* maxes, const float* sums, const int* targets, int BT,
                                               int V, VocabShard shard) override;

    bool has_bf16() const override { return true; }
    void cast_to_bf16(BFloat16* out, const float* inp, std::size_t n) override;
    void matmul_forward_bf16(float* out, const BFloat16* inp, const BFloat16* weight, const float* bias, int N, int C,
                             int OC) override;
    void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const BFloat16* dout, const BFloat16* inp,
                              const BFloat16* weight, int N, int C, int OC) override;
    void matmul_backward_bf16_overwrite_input(float* dinp, float* dweight, float* dbias, const BFloat16* dout,
                                              const BFloat16* inp, const BFloat16* weight, int N, int C,
                                              int OC) override;

  private:
    struct Resources;  // stream and cuBLAS handle
    std::unique_ptr<Resources> resources_;
};

}  // namespace parbench

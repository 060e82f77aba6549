// The operators on host memory: plain loops over the shared formulas of kernels/*_math.hpp,
// and OpenBLAS sgemm for the linear layers. Single-threaded loops: on the machines here each
// MPI rank gets one core. One .cpp per op family defines its members.
#pragma once

#include <vector>

#include "train/ops/ops.hpp"
#include "train/ops/skinny_gemm.hpp"

namespace parbench {

// Which GEMMs the linear layers use: skinny_gemm where it suits (a few rows, the avx2 path),
// else OpenBLAS; or OpenBLAS always (parbench-ops times both side by side).
enum class CpuGemm { fastest, openblas };

class CpuOps : public Ops {
  public:
    using Ops::encoder_backward;
    using Ops::encoder_forward;

    // The loops' path (device/cpu_kernels.hpp): choose_cpu_kernels()'s, or `kernels` (the tests
    // run each path this CPU executes); a baseline build takes the baseline path whatever is asked.
    explicit CpuOps(CpuGemm gemm = CpuGemm::fastest);
    explicit CpuOps(CpuKernels kernels, CpuGemm gemm = CpuGemm::fastest);
    CpuKernels kernels() const { return kernels_; }
    // The widest path this build holds (baseline in the baseline build, else avx512).
    static CpuKernels widest_built();

    std::string name() const override { return "cpu"; }
    bool tiles_block_attention() const override { return true; }
    std::size_t block_attention_scratch_floats(const AttentionBlock& block) const override {
        return 2 * block.sub_block_tile_elements();
    }
    void synchronize() override {}

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

    void matmul_backward_overwrite_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                         const float* inp, const float* weight, int N, int C, int OC) override;
    bool has_weight_gradient_rows() const override { return true; }
    void matmul_weight_gradient_rows(float* dweight_rows, const float* dout, const float* inp, int N, int C, int OC,
                                     int first, int rows) override;
    void matmul_input_gradient_rows(float* dinp, const float* dout, const float* weight, int N, int C, int OC,
                                    int first, int rows, bool accumulate) override;
    void gelu_backward_overwrite(float* dinp, const float* inp, const float* dout, std::size_t n) override;
    void swiglu_backward_overwrite(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                   std::size_t n) override;
    void crossentropy_shard_backward_overwrite(float* dlogits, const float* dlosses, const float* logits,
                                               const float* maxes, const float* sums, const int* targets, int BT,
                                               int V, VocabShard shard) override;

    void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int step) override;
    void adamw_update_clearing_grads(float* params, float* grads, float* m, float* v, std::size_t n, float lr,
                                     float beta1, float beta2, float eps, float weight_decay, int step) override;
    double adamw_update_squares(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                                float beta1, float beta2, float eps, float weight_decay, int step) override;
    double adamw_update_clearing_grads_squares(float* params, float* grads, float* m, float* v, std::size_t n, float lr,
                                               float beta1, float beta2, float eps, float weight_decay,
                                               int step) override;

    // bf16 as an exact emulation of the GPU's: the same round-to-nearest-even cast
    // (kernels/half_types.hpp), then the bf16 operands widened to fp32 (exact) and multiplied
    // by sgemm with fp32 accumulation, so the bf16 engine path runs and is tested without a GPU.
    bool has_bf16() const override { return true; }
    void cast_to_bf16(BFloat16* out, const float* inp, std::size_t n) override;
    void matmul_forward_bf16(float* out, const BFloat16* inp, const BFloat16* weight, const float* bias, int N, int C,
                             int OC) override;
    void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const BFloat16* dout, const BFloat16* inp,
                              const BFloat16* weight, int N, int C, int OC) override;

  private:
    bool uses_skinny_gemm(int rows) const { return gemm_ == CpuGemm::fastest && skinny_gemm::suits(kernels_, rows); }
    void linear_backward(float* dinp, float dinp_beta, float* dweight, float* dbias, const float* dout,
                         const float* inp, const float* weight, int N, int C, int OC);

    // fp32 copies of the bf16 operands for sgemm: host-side state of the emulation, not
    // device memory a GPU run would hold (the engine's bf16 copies are in the ledger). They
    // only grow, to the largest matmul, so after the first step nothing is allocated.
    std::vector<float> widened_inp_, widened_weight_, widened_dout_;
    // skinny_gemm's copies of the operands of a few rows' matmuls: grown once, like those above.
    skinny_gemm::Scratch skinny_scratch_;
    CpuGemm gemm_;
    CpuKernels kernels_;
    // RoPE's cosines and sines of one position (rope.cpp): grown to the head size once.
    std::vector<float> rope_turns_;
};

}  // namespace parbench

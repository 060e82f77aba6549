// The operators the training engine composes into forward and backward passes, one call per
// layer in the style of llm.c: `<op>_forward(outputs..., inputs..., sizes)` and
// `<op>_backward(dinputs..., ..., sizes)`. One interface, two implementations (CpuOps on host
// memory, CudaOps on GPU memory), so the engine runs unchanged on either device.
//
// Conventions, for every op:
//   - float32, row-major; shapes in the comments, e.g. (B,T,C). Pointers point into the
//     memory of the device the Ops was made for (host for CPU, GPU for CUDA).
//   - Backward ops ACCUMULATE into parameter and input gradients (+=), so the engine zeroes
//     gradients once per step and gradient accumulation over micro-batches and residual
//     branches comes for free. Scratch outputs of backward (attention's dpreatt, datt) are
//     overwritten. A gradient pointer documented "or nullptr" is skipped when null.
//   - Sizes are the LOCAL sizes of this rank: attention takes the local head count and local
//     channel count, matmul assumes nothing about OC vs C, the vocabulary may be a shard
//     [vocab_start, vocab_start + V). That is what tensor and sequence parallelism need.
//   - Calls are asynchronous on a GPU (one stream, in order); synchronize() waits.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <string>

#include "kernels/block_attention_math.hpp"
#include "kernels/gqa_math.hpp"
#include "kernels/moe_router_math.hpp"
#include "kernels/half_types.hpp"

namespace parbench {

class Device;

// The part [start, start + size) of the vocabulary this rank holds (vocab-parallel embedding
// and cross-entropy). The whole vocabulary is {0, V}.
struct VocabShard {
    int start = 0;
    int size = std::numeric_limits<int>::max();
    bool contains(int token) const { return token >= start && token - start < size; }
};

class Ops {
  public:
    virtual ~Ops() = default;
    virtual std::string name() const = 0;  // "cpu" or "cuda"
    // Waits until every op issued so far has finished (a no-op on the CPU).
    virtual void synchronize() = 0;

    // ---- linear layer: out = inp · weightᵀ + bias ---------------------------------------
    // out (N,OC), inp (N,C), weight (OC,C), bias (OC) or nullptr.
    virtual void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                                int OC) = 0;
    // dinp (N,C), dweight (OC,C), dbias (OC), each or nullptr; dout (N,OC). +=
    virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                 const float* weight, int N, int C, int OC) = 0;

    // ---- layernorm over the last dimension (eps 1e-5) -----------------------------------
    // out (N,C), mean (N), rstd (N) saved for backward; inp (N,C), weight (C), bias (C).
    virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                   const float* bias, int N, int C) = 0;
    // dinp (N,C), dweight (C), dbias (C). +=
    virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                    const float* weight, const float* mean, const float* rstd, int N, int C) = 0;

    // ---- GELU, tanh approximation -------------------------------------------------------
    virtual void gelu_forward(float* out, const float* inp, std::size_t n) = 0;
    virtual void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) = 0;  // +=

    // ---- causal multi-head self-attention -----------------------------------------------
    // qkv (B,T,3C): each row is [q (C) | k (C) | v (C)], heads contiguous inside each part,
    // head size C/NH. C and NH are this rank's channels and heads. Scale 1/sqrt(C/NH).
    // out (B,T,C); preatt (B,NH,T,T) scaled scores, att (B,NH,T,T) probabilities; entries
    // above the diagonal (future positions) are written as 0 in both.
    virtual void attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C,
                                   int NH) = 0;
    // dqkv (B,T,3C) +=; dpreatt, datt (B,NH,T,T) are scratch and overwritten.
    virtual void attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                                    const float* att, int B, int T, int C, int NH) = 0;

    // ---- Llama's ops (kernels/{rmsnorm,swiglu,rope,gqa}_math.hpp give the formulas) -------
    // RMSNorm over the last dimension: out (N,C), rstd (N) saved; inp (N,C), weight (C).
    virtual void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                                 float eps) = 0;
    // dinp (N,C), dweight (C). +=
    virtual void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                                  const float* weight, const float* rstd, int N, int C) = 0;
    // SwiGLU's product: out (n) = silu(gate) * up.
    virtual void swiglu_forward(float* out, const float* gate, const float* up, std::size_t n) = 0;
    // dgate, dup (n). +=
    virtual void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                 std::size_t n) = 0;
    // Rotary embedding IN PLACE on x (B,T,H*hs): token t's heads turn by positions[t]
    // (positions: T ints in device memory). rope_backward turns a gradient back (in place
    // too: d(input) of a rotation is the gradient turned by the negative angle).
    virtual void rope_forward(float* x, const int* positions, int B, int T, int H, int hs, float theta) = 0;
    virtual void rope_backward(float* dx, const int* positions, int B, int T, int H, int hs, float theta) = 0;
    // Causal grouped-query attention (GqaShape gives the layouts and the head mapping), scale
    // 1/sqrt(hs): out (B,T,NH*hs); preatt, att (B,NH,T,T) as attention_forward writes them.
    virtual void gqa_attention_forward(float* out, float* preatt, float* att, const float* q, const float* k,
                                       const float* v, const GqaShape& shape) = 0;
    // dq (B,T,NH*hs), dk, dv (B,T,NKV*hs) +=; dpreatt, datt (B,NH,T,T) scratch, overwritten.
    virtual void gqa_attention_backward(float* dq, float* dk, float* dv, float* dpreatt, float* datt,
                                        const float* dout, const float* q, const float* k, const float* v,
                                        const float* att, const GqaShape& shape) = 0;

    // ---- blockwise attention, ring attention's pieces (kernels/block_attention_math.hpp) -----
    // Whether these kernels keep a block's scores in a tile of a fixed number of query rows
    // (kernels/block_attention_math.hpp's block_query_rows), so that a whole causal sequence as
    // one block keeps no T x T array: then a model may use them for its whole-sequence
    // attention (train/ops/sequence_attention.hpp). The CPU's do; the CUDA kernels write the
    // block's whole B x NH x rows x cols tile, so a GPU keeps the standard attention.
    virtual bool tiles_block_attention() const = 0;
    // Floats of the scratch block_attention_backward takes for `block` (the forward's `scores`
    // takes half of it).
    virtual std::size_t block_attention_scratch_floats(const AttentionBlock& block) const = 0;
    // The block's queries against its keys/values (AttentionBlock: token windows of q and k/v,
    // mask full or causal-diagonal; a fully masked block is not called). Writes, at the block's
    // query rows, part_out (out's layout) = sum_j exp(s_j - m) v_j UNNORMALISED, part_max = m
    // and part_sum = sum_j exp(s_j - m) (row statistics (B, q_tokens, NH)). scores
    // (block_attention_scratch_floats(block) / 2) is scratch.
    virtual void block_attention_forward(float* part_out, float* part_max, float* part_sum, float* scores,
                                         const float* q, const float* k, const float* v,
                                         const AttentionBlock& block) = 0;
    // Merges a partial into the running (out, row_max, row_sum) at the block's query rows with
    // the online-softmax rescaling. Start the running state at out = 0, max = -inf, sum = 0.
    virtual void block_attention_merge(float* out, float* row_max, float* row_sum, const float* part_out,
                                       const float* part_max, const float* part_sum,
                                       const AttentionBlock& block) = 0;
    // After the last merge, over `rows` rows of hs floats (B*T*NH): out /= row_sum and
    // lse = row_max + log(row_sum), what backward needs.
    virtual void block_attention_finish(float* out, float* lse, const float* row_max, const float* row_sum,
                                        std::size_t rows, int hs) = 0;
    // delta (rows) = sum over each row of hs floats of dout * out (FlashAttention-2's D).
    virtual void block_attention_delta(float* delta, const float* dout, const float* out, std::size_t rows,
                                       int hs) = 0;
    // The block's dq (q's layout), dk, dv (k's layout) +=, P recomputed from q, k and lse, with
    // delta from block_attention_delta on the finished output. scratch
    // (block_attention_scratch_floats(block)).
    virtual void block_attention_backward(float* dq, float* dk, float* dv, float* scratch, const float* dout,
                                          const float* q, const float* k, const float* v, const float* lse,
                                          const float* delta, const AttentionBlock& block) = 0;

    // ---- strided copies (resharding for context parallelism) -------------------------------
    // `rows` rows of `width` floats, row r at src + r*src_pitch, to dst + r*dst_pitch:
    // copy_rows overwrites, add_rows adds (+=). Pitches in floats; regions must not overlap.
    virtual void copy_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch,
                           std::size_t width, std::size_t rows) = 0;
    virtual void add_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch,
                          std::size_t width, std::size_t rows) = 0;

    // ---- token + position embedding -----------------------------------------------------
    // out (B,T,C) = wte[token - shard.start] (zero when the token is outside the shard)
    //             + wpe[t] (skipped when wpe is nullptr: in a vocab-parallel group exactly one
    //               rank adds positions, so the sum over ranks counts them once).
    // tokens (B,T), wte (shard.size,C), wpe (maxT,C) or nullptr.
    virtual void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T,
                                 int C, VocabShard shard) = 0;
    // dwte (shard.size,C) += for tokens in the shard; dwpe (maxT,C) += unless nullptr.
    virtual void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C,
                                  VocabShard shard) = 0;
    void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C) {
        encoder_forward(out, tokens, wte, wpe, B, T, C, VocabShard{});
    }
    void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C) {
        encoder_backward(dwte, dwpe, dout, tokens, B, T, C, VocabShard{});
    }

    // ---- elementwise ----------------------------------------------------------------------
    virtual void residual_forward(float* out, const float* a, const float* b, std::size_t n) = 0;  // out = a + b
    virtual void add_inplace(float* acc, const float* x, std::size_t n) = 0;                      // acc += x
    virtual void scale(float* x, float factor, std::size_t n) = 0;                                // x *= factor
    virtual void fill(float* x, float value, std::size_t n) = 0;
    // The sum of x[i]^2 over n, back on the host (a gradient's share of the step's grad norm,
    // train/schemes/gradient_squares.hpp). Waits for x's writes; the CPU sums each 4096
    // elements in float lanes (cpu_simd.hpp's order) and those sums in double.
    virtual double sum_of_squares(const float* x, std::size_t n) = 0;

    // ---- softmax cross-entropy over the whole vocabulary ----------------------------------
    // losses (BT), probs (BT,V), logits (BT,V), targets (BT) in [0, V).
    virtual void crossentropy_forward(float* losses, float* probs, const float* logits, const int* targets, int BT,
                                      int V) = 0;
    // dlogits (BT,V) += dlosses[i] * (probs - onehot(target)).
    virtual void crossentropy_backward(float* dlogits, const float* dlosses, const float* probs, const int* targets,
                                       int BT, int V) = 0;

    // ---- vocab-parallel cross-entropy building blocks (Megatron-LM sec. 3) -----------------
    // Each rank holds logits (BT,V) for its shard. The engine runs: row_max -> allreduce(max)
    // -> row_sum_exp -> allreduce(sum); target_logit -> allreduce(sum);
    // crossentropy_losses_from_parts; then crossentropy_shard_backward with the reduced parts.
    virtual void row_max(float* maxes, const float* logits, int BT, int V) = 0;  // maxes (BT)
    // sums (BT) = sum_v exp(logits - maxes).
    virtual void row_sum_exp(float* sums, const float* logits, const float* maxes, int BT, int V) = 0;
    // out (BT) = logits[i, target - shard.start] when the target is in the shard, else 0.
    virtual void target_logit(float* out, const float* logits, const int* targets, int BT, int V,
                              VocabShard shard) = 0;
    // losses (BT) = log(sums) + maxes - target_logits (all reduced over the group).
    virtual void crossentropy_losses_from_parts(float* losses, const float* maxes, const float* sums,
                                                const float* target_logits, int BT) = 0;
    // dlogits (BT,V) += dlosses * (exp(logits - maxes) / sums - onehot(target in shard)).
    virtual void crossentropy_shard_backward(float* dlogits, const float* dlosses, const float* logits,
                                             const float* maxes, const float* sums, const int* targets, int BT, int V,
                                             VocabShard shard) = 0;

    // ---- mean squared error, per row ------------------------------------------------------
    // losses (N) = mean_d (pred - target)^2; pred, target (N,D).
    virtual void mse_forward(float* losses, const float* pred, const float* target, int N, int D) = 0;
    // dpred (N,D) += dlosses[n] * 2 (pred - target) / D.
    virtual void mse_backward(float* dpred, const float* dlosses, const float* pred, const float* target, int N,
                              int D) = 0;

    // ---- mixture of experts (kernels/moe_router_math.hpp, kernels/moe_dispatch_math.hpp) -----
    // Assignment a = t·k + i is token t's i-th choice; slot (N,k) its expert-major row, -1 when
    // dropped (train/moe/router.hpp decides it). Rows are C floats.
    // Each token's routing: scores (N,E), chosen (N,k), weights (N,k) from logits (N,E); bias
    // (E) or nullptr steers the choice only.
    virtual void moe_route(float* scores, int* chosen, float* weights, const float* logits, const float* bias, int N,
                           int E, int k, MoeScore score) = 0;
    // dispatched row slot[a] = x (N,C) row t, for each kept assignment; other rows untouched.
    virtual void moe_dispatch(float* dispatched, const float* x, const int* slot, int N, int k, int C) = 0;
    // out (N,C) += each token's kept expert_out rows times their weights (N,k).
    virtual void moe_combine(float* out, const float* expert_out, const int* slot, const float* weights, int N, int k,
                             int C) = 0;
    // dweights (N,k) = dout_t · expert_out[slot] (0 for a dropped assignment) and dexpert_out
    // [slot] = weight · dout_t, both overwritten; dout (N,C).
    virtual void moe_combine_backward(float* dexpert_out, float* dweights, const float* dout, const float* expert_out,
                                      const int* slot, const float* weights, int N, int k, int C) = 0;
    // dx (N,C) += each token's kept ddispatched rows. +=
    virtual void moe_dispatch_backward(float* dx, const float* ddispatched, const int* slot, int N, int k, int C) = 0;
    // dlogits (N,E) overwritten: the router's backward from dweights (N,k), which must be 0 for
    // dropped assignments (moe_combine_backward writes them so), through the weights and the
    // score function, plus the balancing loss's term with coefficients moe_balance_coefficient
    // (balance_weight, E, routed[e], N, k); routed (E): assignments chosen per expert. The
    // forward's scores (N,E), weights (N,k), chosen (N,k).
    virtual void moe_route_backward(float* dlogits, const float* dweights, const float* scores, const float* weights,
                                    const int* chosen, const int* routed, double balance_weight, int N, int E, int k,
                                    MoeScore score) = 0;

    // ---- copies between this device's memory and the host's ---------------------------------
    // copy_to_host waits for the ops issued before it and for the copy (a GPU's stream syncs
    // there); copy_from_host returns once `host` may be reused.
    virtual void copy_to_host(void* host, const void* source, std::size_t bytes) = 0;
    virtual void copy_from_host(void* target, const void* host, std::size_t bytes) = 0;

    // ---- first writes: the backward ops above with their input gradient OVERWRITTEN (=) -----
    // An input gradient's first contribution in a step would otherwise need a fill(0) before
    // the accumulating op: a pass of writes, then the op reading the zeros back. Same
    // arguments and results as the += forms on a zeroed buffer (parameter gradients still +=).
    // The defaults are that fill and the += op; CpuOps and CudaOps write directly.
    // matmul_backward with dinp (N,C) overwritten; dweight, dbias += (each or nullptr).
    virtual void matmul_backward_overwrite_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                                 const float* inp, const float* weight, int N, int C, int OC);
    virtual void gelu_backward_overwrite(float* dinp, const float* inp, const float* dout, std::size_t n);
    virtual void swiglu_backward_overwrite(float* dgate, float* dup, const float* dout, const float* gate,
                                           const float* up, std::size_t n);
    virtual void crossentropy_shard_backward_overwrite(float* dlogits, const float* dlosses, const float* logits,
                                                       const float* maxes, const float* sums, const int* targets,
                                                       int BT, int V, VocabShard shard);

    // ---- a weight gradient in pieces, for an optimizer fused with it ------------------------
    // Rows [first, first + rows) of a linear layer's weight gradient, OVERWRITTEN:
    // dweight_rows (rows,C) = dout[:, first:first+rows]ᵀ · inp, dout (N,OC), inp (N,C): the values
    // matmul_backward adds into those rows of a zeroed dweight. A model whose scheme updates a
    // unit piece by piece (ParameterAccess::updates_in_pieces) computes each piece into a buffer
    // that stays in cache and hands it straight to the update, so the gradient never makes the
    // round trip through memory. has_weight_gradient_rows() says whether the op exists (CpuOps);
    // the default throws std::logic_error.
    virtual bool has_weight_gradient_rows() const { return false; }
    virtual void matmul_weight_gradient_rows(float* dweight_rows, const float* dout, const float* inp, int N, int C,
                                             int OC, int first, int rows);
    // The input gradient's share of those rows, for the same model: dinp (N,C) = (accumulate ?
    // dinp : 0) + dout[:, first:first+rows] · weight[first:first+rows, :], so that each piece of
    // the weight is read by the input gradient right before its update writes it. Pieces that
    // start at multiples of 256 rows give matmul_backward's bits on CpuOps where skinny_gemm
    // suits, the same values within rounding elsewhere. Exists with matmul_weight_gradient_rows.
    virtual void matmul_input_gradient_rows(float* dinp, const float* dout, const float* weight, int N, int C,
                                            int OC, int first, int rows, bool accumulate);

    // ---- AdamW on fp32 master weights and state; step counts from 1 ------------------------
    virtual void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                              float beta1, float beta2, float eps, float weight_decay, int step) = 0;
    // adamw_update, then grads (n) = 0: a scheme that accumulates into one gradient buffer
    // across steps leaves it zeroed for the next step without a separate fill. The default
    // is those two calls; CpuOps and CudaOps clear each gradient in the same pass that reads it
    // (the line is in cache and written back anyway, so the clearing costs no extra traffic).
    virtual void adamw_update_clearing_grads(float* params, float* grads, float* m, float* v, std::size_t n,
                                             float lr, float beta1, float beta2, float eps, float weight_decay,
                                             int step);
    // The same two updates, returning the sum of the squares of the gradients they read (the
    // step's grad norm: train/schemes/gradient_squares.hpp). The defaults read the gradients
    // twice (sum_of_squares, then the update); CpuOps reads them once for both.
    virtual double adamw_update_squares(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                                        float beta1, float beta2, float eps, float weight_decay, int step);
    virtual double adamw_update_clearing_grads_squares(float* params, float* grads, float* m, float* v, std::size_t n,
                                                       float lr, float beta1, float beta2, float eps,
                                                       float weight_decay, int step);

    // ---- bf16 compute with fp32 master weights (--precision bf16, train/matmuls.hpp) ------
    // has_bf16() says whether the ops below exist (CUDA: cuBLAS bf16 GEMMs; CPU: an exact
    // emulation on sgemm); where they do not, they throw UsageError.
    virtual bool has_bf16() const { return false; }
    // out (n) = round-to-nearest-even bf16 copy of inp (n): weights or activations for bf16 GEMMs.
    virtual void cast_to_bf16(BFloat16* out, const float* inp, std::size_t n);
    // matmul_forward with bf16 inp (N,C) and weight (OC,C), fp32 accumulation and fp32 out (N,OC);
    // bias (OC) fp32 or nullptr.
    virtual void matmul_forward_bf16(float* out, const BFloat16* inp, const BFloat16* weight, const float* bias,
                                     int N, int C, int OC);
    // matmul_backward with bf16 dout (N,OC), inp (N,C), weight (OC,C); fp32 accumulation into
    // fp32 dinp (N,C), dweight (OC,C), dbias (OC), each or nullptr. +=
    virtual void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const BFloat16* dout,
                                      const BFloat16* inp, const BFloat16* weight, int N, int C, int OC);
    // matmul_backward_bf16 with dinp (N,C) OVERWRITTEN, the first write (as
    // matmul_backward_overwrite_input); dweight, dbias +=. The default is a fill and the += op;
    // CudaOps writes directly (cuBLAS beta 0).
    virtual void matmul_backward_bf16_overwrite_input(float* dinp, float* dweight, float* dbias, const BFloat16* dout,
                                                      const BFloat16* inp, const BFloat16* weight, int N, int C,
                                                      int OC);
};

// CpuOps for the CPU device; CudaOps for a CUDA device in builds with CUDA. Throws UsageError
// for a device kind this build cannot run ops on.
std::unique_ptr<Ops> make_ops(const Device& device);

}  // namespace parbench

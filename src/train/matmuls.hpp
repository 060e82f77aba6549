// Every linear layer of a model goes through Matmuls, so the run's precision is decided in
// one place. Mixed precision the way autocast treats matmuls: parameters, gradients and
// AdamW state stay fp32 (the master weights); under bf16 each matmul, forward and backward,
// rounds its operands to bf16 (round to nearest even), multiplies them with fp32
// accumulation and writes fp32 outputs. Everything else (LayerNorm, attention's softmax,
// GELU, cross-entropy, AdamW) stays fp32.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "theory/precision.hpp"
#include "train/memory_ledger.hpp"
#include "train/ops/ops.hpp"

namespace parbench {

class Matmuls {
  public:
    // `shapes`: every matmul shape the model runs; under bf16 they size the operand copies,
    // allocated here once from the ledger (activations: pass-time scratch) and reused by
    // every call. Throws UsageError when the ops have no bf16 matmuls.
    Matmuls(Ops& ops, Precision precision, MemoryLedger& ledger, const std::vector<MatmulShape>& shapes);

    Precision precision() const { return precision_; }
    // Ops::matmul_forward / matmul_backward (same arguments, same += semantics), in the
    // run's precision.
    void forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC);
    void backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                  const float* weight, int N, int C, int OC);
    // backward with dinp OVERWRITTEN (Ops::matmul_backward_overwrite_input): its first write,
    // no fill(0) before.
    void backward_overwrite_input(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                  const float* weight, int N, int C, int OC);

  private:
    // The bf16 backward; dinp overwritten (the first write) or added to.
    void backward_bf16(float* dinp, bool overwrite_input, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, int N, int C, int OC);

    Ops& ops_;
    Precision precision_;
    // bf16 copies of the operands of the matmul in flight (empty under fp32). One set is
    // enough: the ops run in order on one stream, so a call's copies are consumed before the
    // next call's casts overwrite them.
    Buffer inp_, weight_, dout_;
};

}  // namespace parbench

#include "train/matmuls.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "theory/matmul_buffers.hpp"

namespace parbench {

Matmuls::Matmuls(Ops& ops, Precision precision, MemoryLedger& ledger, const std::vector<MatmulShape>& shapes)
    : ops_(ops), precision_(precision) {
    if (precision_ == Precision::fp32) return;
    if (!ops_.has_bf16()) throw UsageError("--precision bf16: the " + ops_.name() + " ops have no bf16 matmuls");
    // The copies from the table the memory theory sums (theory/matmul_buffers.hpp).
    const Bf16OperandBuffers sizes = bf16_operand_buffers(precision_, shapes);
    static_assert(sizeof(BFloat16) == Bf16OperandBuffers::element_bytes);
    inp_ = ledger.allocate(MemoryCategory::activations, sizes.input * sizeof(BFloat16));
    weight_ = ledger.allocate(MemoryCategory::activations, sizes.weight * sizeof(BFloat16));
    dout_ = ledger.allocate(MemoryCategory::activations, sizes.output_gradient * sizeof(BFloat16));
}

namespace {

// A matmul the shapes given at construction did not cover would overrun the copies.
void check_fits(const Buffer& buffer, std::size_t elements, const char* operand) {
    if (elements * sizeof(BFloat16) > buffer.bytes())
        throw std::logic_error(std::string("Matmuls: a bf16 ") + operand +
                               " larger than the shapes the model declared");
}

}  // namespace

void Matmuls::forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
    if (precision_ == Precision::fp32) {
        ops_.matmul_forward(out, inp, weight, bias, N, C, OC);
        return;
    }
    const auto inp_n = static_cast<std::size_t>(N) * static_cast<std::size_t>(C);
    const auto weight_n = static_cast<std::size_t>(OC) * static_cast<std::size_t>(C);
    check_fits(inp_, inp_n, "input");
    check_fits(weight_, weight_n, "weight");
    // The weight is cast again at every use, not cached per step: simple, and its cost is
    // small next to the GEMM for the batch sizes this engine runs.
    ops_.cast_to_bf16(inp_.as<BFloat16>(), inp, inp_n);
    ops_.cast_to_bf16(weight_.as<BFloat16>(), weight, weight_n);
    ops_.matmul_forward_bf16(out, inp_.as<BFloat16>(), weight_.as<BFloat16>(), bias, N, C, OC);
}

void Matmuls::backward_overwrite_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                       const float* inp, const float* weight, int N, int C, int OC) {
    if (precision_ == Precision::fp32) {
        ops_.matmul_backward_overwrite_input(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
        return;
    }
    backward_bf16(dinp, true, dweight, dbias, dout, inp, weight, N, C, OC);
}

void Matmuls::backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, int N, int C, int OC) {
    if (precision_ == Precision::fp32) {
        ops_.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
        return;
    }
    backward_bf16(dinp, false, dweight, dbias, dout, inp, weight, N, C, OC);
}

void Matmuls::backward_bf16(float* dinp, bool overwrite_input, float* dweight, float* dbias, const float* dout,
                            const float* inp, const float* weight, int N, int C, int OC) {
    const auto dout_n = static_cast<std::size_t>(N) * static_cast<std::size_t>(OC);
    const auto inp_n = static_cast<std::size_t>(N) * static_cast<std::size_t>(C);
    const auto weight_n = static_cast<std::size_t>(OC) * static_cast<std::size_t>(C);
    check_fits(dout_, dout_n, "output gradient");
    ops_.cast_to_bf16(dout_.as<BFloat16>(), dout, dout_n);
    // Only the operands a requested gradient reads are cast: the weight for dinp, the input
    // for dweight (a zero-bubble W pass has no dinp).
    const BFloat16* weight_bf16 = nullptr;
    const BFloat16* inp_bf16 = nullptr;
    if (dinp != nullptr) {
        check_fits(weight_, weight_n, "weight");
        ops_.cast_to_bf16(weight_.as<BFloat16>(), weight, weight_n);
        weight_bf16 = weight_.as<BFloat16>();
    }
    if (dweight != nullptr) {
        check_fits(inp_, inp_n, "input");
        ops_.cast_to_bf16(inp_.as<BFloat16>(), inp, inp_n);
        inp_bf16 = inp_.as<BFloat16>();
    }
    if (overwrite_input)
        ops_.matmul_backward_bf16_overwrite_input(dinp, dweight, nullptr, dout_.as<BFloat16>(), inp_bf16, weight_bf16,
                                                  N, C, OC);
    else
        ops_.matmul_backward_bf16(dinp, dweight, nullptr, dout_.as<BFloat16>(), inp_bf16, weight_bf16, N, C, OC);
    // The bias gradient is a sum over rows, not a GEMM: it stays fp32, from the unrounded
    // output gradient (the fp32 backward with only dbias requested runs just that sum).
    if (dbias != nullptr) ops_.matmul_backward(nullptr, nullptr, dbias, dout, nullptr, nullptr, N, C, OC);
}

}  // namespace parbench

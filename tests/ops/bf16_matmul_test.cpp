// The bf16 matmuls on the CPU (an exact emulation of the GPU's: round-to-nearest-even
// operands, fp32 accumulation) and the engine's Matmuls wrapper that picks them under
// --precision bf16. "Exact" is tested bit for bit against sgemm on operands rounded by
// kernels/half_types.hpp; that the rounding happens at all, by differing from plain fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "device/cpu_device.hpp"
#include "gradient_check.hpp"
#include "kernels/half_types.hpp"
#include "train/matmuls.hpp"
#include "train/memory_ledger.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

std::vector<float> rounded_to_bf16(std::vector<float> values) {
    for (float& value : values) value = to_float(to_bfloat16(value));
    return values;
}

std::vector<BFloat16> cast(CpuOps& ops, const std::vector<float>& values) {
    std::vector<BFloat16> out(values.size());
    ops.cast_to_bf16(out.data(), values.data(), values.size());
    return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool any_difference(const std::vector<float>& a, const std::vector<float>& b) { return !bitwise_equal(a, b); }

TEST(CpuOpsBf16, HasBf16AndCastsToNearestEven) {
    CpuOps ops;
    EXPECT_TRUE(ops.has_bf16());
    // 1 + 2^-8 lies halfway between the bf16 neighbours 1 and 1 + 2^-7: ties go to the even 1;
    // 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to the even 1 + 2^-6.
    const std::vector<float> values{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f, 0.0f, 1e-3f};
    const std::vector<BFloat16> out = cast(ops, values);
    EXPECT_EQ(to_float(out[0]), 1.0f);
    EXPECT_EQ(to_float(out[1]), 1.0f + 0x1p-6f);
    for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(out[i].bits, to_bfloat16(values[i]).bits) << i;
}

TEST(CpuOpsBf16, ForwardIsSgemmOnRoundedOperandsBitForBit) {
    CpuOps ops;
    const int N = 6, C = 33, OC = 5;  // C long enough that rounding the operands shows in the sums
    const auto inp = random_vector(N * C, 21), weight = random_vector(OC * C, 22), bias = random_vector(OC, 23);
    std::vector<float> bf16(N * OC), emulated(N * OC), fp32(N * OC);
    ops.matmul_forward_bf16(bf16.data(), cast(ops, inp).data(), cast(ops, weight).data(), bias.data(), N, C, OC);
    ops.matmul_forward(emulated.data(), rounded_to_bf16(inp).data(), rounded_to_bf16(weight).data(), bias.data(), N,
                       C, OC);
    ops.matmul_forward(fp32.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
    EXPECT_TRUE(bitwise_equal(bf16, emulated));
    EXPECT_TRUE(any_difference(bf16, fp32));
    for (int i = 0; i < N * OC; ++i) EXPECT_NEAR(bf16[i], fp32[i], 0.1) << i;  // rounded, not garbage
}

TEST(CpuOpsBf16, BackwardIsSgemmOnRoundedOperandsBitForBit) {
    CpuOps ops;
    const int N = 7, C = 9, OC = 31;
    const auto inp = random_vector(N * C, 24), weight = random_vector(OC * C, 25), dout = random_vector(N * OC, 26);
    // Accumulates (+=) like the fp32 backward: start all three from the same prefill.
    auto dinp = prefilled(N * C), dweight = prefilled(OC * C), dbias = prefilled(OC);
    auto dinp_e = dinp, dweight_e = dweight, dbias_e = dbias, dinp_f = dinp, dweight_f = dweight, dbias_f = dbias;
    ops.matmul_backward_bf16(dinp.data(), dweight.data(), dbias.data(), cast(ops, dout).data(),
                             cast(ops, inp).data(), cast(ops, weight).data(), N, C, OC);
    ops.matmul_backward(dinp_e.data(), dweight_e.data(), dbias_e.data(), rounded_to_bf16(dout).data(),
                        rounded_to_bf16(inp).data(), rounded_to_bf16(weight).data(), N, C, OC);
    ops.matmul_backward(dinp_f.data(), dweight_f.data(), dbias_f.data(), dout.data(), inp.data(), weight.data(), N,
                        C, OC);
    EXPECT_TRUE(bitwise_equal(dinp, dinp_e));
    EXPECT_TRUE(bitwise_equal(dweight, dweight_e));
    EXPECT_TRUE(bitwise_equal(dbias, dbias_e));
    EXPECT_TRUE(any_difference(dinp, dinp_f));
    EXPECT_TRUE(any_difference(dweight, dweight_f));
}

TEST(CpuOpsBf16, BackwardReadsOnlyTheOperandsOfRequestedGradients) {
    // A zero-bubble W pass asks for dweight alone and casts no weight: null must be fine.
    CpuOps ops;
    const int N = 3, C = 4, OC = 2;
    const auto inp = random_vector(N * C, 27), dout = random_vector(N * OC, 28);
    auto dweight = prefilled(OC * C), expected = prefilled(OC * C);
    ops.matmul_backward_bf16(nullptr, dweight.data(), nullptr, cast(ops, dout).data(), cast(ops, inp).data(),
                             nullptr, N, C, OC);
    ops.matmul_backward(nullptr, expected.data(), nullptr, rounded_to_bf16(dout).data(), rounded_to_bf16(inp).data(),
                        nullptr, N, C, OC);
    EXPECT_TRUE(bitwise_equal(dweight, expected));
}

TEST(Matmuls, PicksThePrecisionsOpsAndCountsItsCopies) {
    CpuDevice device;
    MemoryLedger ledger(device);
    CpuOps ops;
    const int N = 4, C = 40, OC = 6;
    Matmuls fp32(ops, Precision::fp32, ledger, {{N, C, OC}});
    EXPECT_EQ(ledger.usage().total_live, 0u);  // fp32 needs no copies
    Matmuls bf16(ops, Precision::bf16, ledger, {{N, C, OC}, {N, OC, C}});
    // inp max(N·C, N·OC), weight OC·C, dout max(N·OC, N·C), 2 bytes each.
    EXPECT_EQ(ledger.usage().live_of(MemoryCategory::activations), (2u * N * C + OC * C) * sizeof(BFloat16));

    const auto inp = random_vector(N * C, 29), weight = random_vector(OC * C, 30), bias = random_vector(OC, 31);
    const auto dout = random_vector(N * OC, 32);
    std::vector<float> out_fp32(N * OC), out_bf16(N * OC), expected(N * OC);
    fp32.forward(out_fp32.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
    bf16.forward(out_bf16.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
    ops.matmul_forward(expected.data(), rounded_to_bf16(inp).data(), rounded_to_bf16(weight).data(), bias.data(), N,
                       C, OC);
    EXPECT_TRUE(bitwise_equal(out_bf16, expected));
    EXPECT_TRUE(any_difference(out_bf16, out_fp32));

    auto dinp = prefilled(N * C), dweight = prefilled(OC * C), dbias = prefilled(OC);
    auto dinp_e = dinp, dweight_e = dweight, dbias_e = dbias, dbias_rounded = dbias;
    bf16.backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), N, C, OC);
    ops.matmul_backward(dinp_e.data(), dweight_e.data(), nullptr, rounded_to_bf16(dout).data(),
                        rounded_to_bf16(inp).data(), rounded_to_bf16(weight).data(), N, C, OC);
    // The bias gradient is a sum over rows, not a GEMM: fp32, from the unrounded dout.
    ops.matmul_backward(nullptr, nullptr, dbias_e.data(), dout.data(), nullptr, nullptr, N, C, OC);
    ops.matmul_backward(nullptr, nullptr, dbias_rounded.data(), rounded_to_bf16(dout).data(), nullptr, nullptr, N,
                        C, OC);
    EXPECT_TRUE(bitwise_equal(dinp, dinp_e));
    EXPECT_TRUE(bitwise_equal(dweight, dweight_e));
    EXPECT_TRUE(bitwise_equal(dbias, dbias_e));
    EXPECT_TRUE(any_difference(dbias, dbias_rounded));

    // A matmul larger than the declared shapes is a bug in the model, caught before any write.
    std::vector<float> big(2 * N * OC);
    EXPECT_THROW(bf16.forward(big.data(), random_vector(2 * N * C, 33).data(), weight.data(), nullptr, 2 * N, C, OC),
                 std::logic_error);
}

// Under bf16 the first write of an input gradient (Ops::matmul_backward_bf16_overwrite_input)
// writes what the += backward adds to zeros, whatever dinp held (NaN: a form that read it
// would spread it); the weight and bias gradients still add.
TEST(Matmuls, Bf16FirstWriteOfTheInputGradientEqualsAddingToZeros) {
    CpuDevice device;
    MemoryLedger ledger(device);
    CpuOps ops;
    const int N = 4, C = 40, OC = 6;
    Matmuls bf16(ops, Precision::bf16, ledger, {{N, C, OC}});
    const auto inp = random_vector(N * C, 34), weight = random_vector(OC * C, 35), dout = random_vector(N * OC, 36);
    std::vector<float> zeroed(N * C, 0.0f), written(N * C, std::nanf(""));
    auto dweight = prefilled(OC * C), dbias = prefilled(OC);
    auto dweight_written = dweight, dbias_written = dbias;
    bf16.backward(zeroed.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), N, C, OC);
    bf16.backward_overwrite_input(written.data(), dweight_written.data(), dbias_written.data(), dout.data(),
                                  inp.data(), weight.data(), N, C, OC);
    EXPECT_TRUE(bitwise_equal(written, zeroed));
    EXPECT_TRUE(bitwise_equal(dweight_written, dweight));
    EXPECT_TRUE(bitwise_equal(dbias_written, dbias));
}

TEST(Matmuls, RefusesUnknownPrecisions) {
    EXPECT_EQ(parse_precision("fp32"), Precision::fp32);
    EXPECT_EQ(parse_precision("bf16"), Precision::bf16);
    EXPECT_THROW(parse_precision("fp16"), UsageError);
}

}  // namespace
}  // namespace parbench

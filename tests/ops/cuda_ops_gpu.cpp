// Every CudaOps op against the CpuOps op on the same random inputs (label gpu). The CPU ops
// are held to finite differences in the unit tests, so agreement here carries that over.
// Each test skips, saying why, when no GPU is visible, and fails when one is there but cannot
// be used.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include "device/cuda_device.hpp"
#include "device/cuda_plugin.hpp"
#include "gradient_check.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cuda_ops.hpp"

namespace parbench {
namespace {

using namespace testing_ops;

// Summation order differs (warp trees, cuBLAS blocking), so agreement is to float rounding
// of sums of a few hundred terms, not bit-exact.
struct Tolerance {
    double absolute = 1e-5;
    double relative = 1e-4;
};

::testing::AssertionResult all_close(const std::vector<float>& gpu, const std::vector<float>& cpu,
                                     Tolerance tolerance = {}) {
    std::size_t wrong = 0;
    std::ostringstream first;
    for (std::size_t i = 0; i < cpu.size(); ++i) {
        const double error = std::abs(static_cast<double>(gpu[i]) - cpu[i]);
        if (!(error <= tolerance.absolute + tolerance.relative * std::abs(cpu[i])) && ++wrong <= 5)
            first << "\n  [" << i << "] gpu " << gpu[i] << ", cpu " << cpu[i];
    }
    if (wrong == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << wrong << " of " << cpu.size() << " elements differ:" << first.str();
}

class CudaOpsTest : public ::testing::Test {
  protected:
    void SetUp() override {
        // No driver or no device: skipped; GPUs that exist but cannot be used: failed.
        const GpuAvailability availability = gpu_availability();
        if (!availability.fault.empty())
            GTEST_FAIL() << "this host has an NVIDIA driver, but its GPUs cannot be used: " << availability.fault;
        if (availability.count == 0) GTEST_SKIP() << "no GPU visible: no NVIDIA driver or no device here";
        device_ = std::make_unique<CudaDevice>(0);
        gpu_ = std::make_unique<CudaOps>(*device_);
    }

    template <typename T>
    Buffer upload(const std::vector<T>& host) {
        Buffer buffer = device_->allocate(std::max<std::size_t>(host.size(), 1) * sizeof(T));
        device_->copy_from_host(buffer, host.data(), host.size() * sizeof(T));
        return buffer;
    }

    template <typename T>
    std::vector<T> download(const Buffer& buffer, std::size_t count) {
        gpu_->synchronize();
        std::vector<T> host(count);
        device_->copy_to_host(host.data(), buffer, count * sizeof(T));
        return host;
    }
    std::vector<float> download(const Buffer& buffer, std::size_t count) { return download<float>(buffer, count); }

    CpuOps cpu_;
    std::unique_ptr<CudaDevice> device_;
    std::unique_ptr<CudaOps> gpu_;
};

TEST_F(CudaOpsTest, MakeOpsPicksCudaOps) { EXPECT_EQ(make_ops(*device_)->name(), "cuda"); }

TEST_F(CudaOpsTest, Matmul) {
    const int N = 64, C = 48, OC = 80;
    const auto inp = random_vector(N * C, 1), weight = random_vector(OC * C, 2), bias = random_vector(OC, 3);
    const auto dout = random_vector(N * OC, 4);
    auto dinp = random_vector(N * C, 5), dweight = random_vector(OC * C, 6), dbias = random_vector(OC, 7);
    Buffer d_inp = upload(inp), d_weight = upload(weight), d_bias = upload(bias), d_dout = upload(dout);
    Buffer d_out = upload(std::vector<float>(N * OC)), d_dinp = upload(dinp), d_dweight = upload(dweight),
           d_dbias = upload(dbias);
    std::vector<float> out(N * OC);
    cpu_.matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
    cpu_.matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), N, C, OC);
    gpu_->matmul_forward(d_out.as<float>(), d_inp.as<float>(), d_weight.as<float>(), d_bias.as<float>(), N, C, OC);
    gpu_->matmul_backward(d_dinp.as<float>(), d_dweight.as<float>(), d_dbias.as<float>(), d_dout.as<float>(),
                          d_inp.as<float>(), d_weight.as<float>(), N, C, OC);
    EXPECT_TRUE(all_close(download(d_out, out.size()), out));
    EXPECT_TRUE(all_close(download(d_dinp, dinp.size()), dinp));
    EXPECT_TRUE(all_close(download(d_dweight, dweight.size()), dweight));
    EXPECT_TRUE(all_close(download(d_dbias, dbias.size()), dbias));
}

TEST_F(CudaOpsTest, MatmulBf16MatchesFp32OnRoundedInputs) {
    const int N = 32, C = 64, OC = 24;
    auto inp = random_vector(N * C, 8), weight = random_vector(OC * C, 9), dout = random_vector(N * OC, 10);
    const auto bias = random_vector(OC, 11);
    Buffer f_inp = upload(inp), f_weight = upload(weight), f_dout = upload(dout), d_bias = upload(bias);
    Buffer b_inp = device_->allocate(inp.size() * 2), b_weight = device_->allocate(weight.size() * 2),
           b_dout = device_->allocate(dout.size() * 2);
    gpu_->cast_to_bf16(b_inp.as<BFloat16>(), f_inp.as<float>(), inp.size());
    gpu_->cast_to_bf16(b_weight.as<BFloat16>(), f_weight.as<float>(), weight.size());
    gpu_->cast_to_bf16(b_dout.as<BFloat16>(), f_dout.as<float>(), dout.size());
    // the cast is the shared round-to-nearest-even of half_types.hpp, bit for bit
    const auto cast = download<BFloat16>(b_inp, inp.size());
    for (std::size_t i = 0; i < inp.size(); ++i) ASSERT_EQ(cast[i].bits, to_bfloat16(inp[i]).bits) << "element " << i;
    for (auto* values : {&inp, &weight, &dout})
        for (float& value : *values) value = to_float(to_bfloat16(value));

    std::vector<float> out(N * OC), dinp(N * C), dweight(OC * C), dbias(OC);
    cpu_.matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
    cpu_.matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), N, C, OC);
    Buffer d_out = upload(std::vector<float>(N * OC)), d_dinp = upload(std::vector<float>(N * C)),
           d_dweight = upload(std::vector<float>(OC * C)), d_dbias = upload(std::vector<float>(OC));
    gpu_->matmul_forward_bf16(d_out.as<float>(), b_inp.as<BFloat16>(), b_weight.as<BFloat16>(), d_bias.as<float>(),
                              N, C, OC);
    gpu_->matmul_backward_bf16(d_dinp.as<float>(), d_dweight.as<float>(), d_dbias.as<float>(), b_dout.as<BFloat16>(),
                               b_inp.as<BFloat16>(), b_weight.as<BFloat16>(), N, C, OC);
    // products of bf16 values are exact in fp32: only the accumulation order differs
    EXPECT_TRUE(all_close(download(d_out, out.size()), out));
    EXPECT_TRUE(all_close(download(d_dinp, dinp.size()), dinp));
    EXPECT_TRUE(all_close(download(d_dweight, dweight.size()), dweight));
    EXPECT_TRUE(all_close(download(d_dbias, dbias.size()), dbias));
}

TEST_F(CudaOpsTest, Layernorm) {
    const int N = 37, C = 100;  // C not a multiple of the warp
    const auto inp = random_vector(N * C, 12, -2.0f, 3.0f), weight = random_vector(C, 13), bias = random_vector(C, 14);
    const auto dout = random_vector(N * C, 15);
    std::vector<float> out(N * C), mean(N), rstd(N);
    auto dinp = random_vector(N * C, 16), dweight = random_vector(C, 17), dbias = random_vector(C, 18);
    Buffer d_inp = upload(inp), d_weight = upload(weight), d_bias = upload(bias), d_dout = upload(dout);
    Buffer d_out = upload(out), d_mean = upload(mean), d_rstd = upload(rstd), d_dinp = upload(dinp),
           d_dweight = upload(dweight), d_dbias = upload(dbias);
    cpu_.layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C);
    cpu_.layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(),
                            mean.data(), rstd.data(), N, C);
    gpu_->layernorm_forward(d_out.as<float>(), d_mean.as<float>(), d_rstd.as<float>(), d_inp.as<float>(),
                            d_weight.as<float>(), d_bias.as<float>(), N, C);
    gpu_->layernorm_backward(d_dinp.as<float>(), d_dweight.as<float>(), d_dbias.as<float>(), d_dout.as<float>(),
                             d_inp.as<float>(), d_weight.as<float>(), d_mean.as<float>(), d_rstd.as<float>(), N, C);
    EXPECT_TRUE(all_close(download(d_out, out.size()), out));
    EXPECT_TRUE(all_close(download(d_mean, N), mean));
    EXPECT_TRUE(all_close(download(d_rstd, N), rstd));
    EXPECT_TRUE(all_close(download(d_dinp, dinp.size()), dinp));
    EXPECT_TRUE(all_close(download(d_dweight, dweight.size()), dweight));
    EXPECT_TRUE(all_close(download(d_dbias, dbias.size()), dbias));
}

TEST_F(CudaOpsTest, GeluAndElementwise) {
    const std::size_t n = 1000;
    const auto inp = random_vector(n, 19, -4.0f, 4.0f), dout = random_vector(n, 20);
    std::vector<float> out(n);
    auto dinp = random_vector(n, 21);
    Buffer d_inp = upload(inp), d_dout = upload(dout), d_out = upload(out), d_dinp = upload(dinp);
    cpu_.gelu_forward(out.data(), inp.data(), n);
    cpu_.gelu_backward(dinp.data(), inp.data(), dout.data(), n);
    gpu_->gelu_forward(d_out.as<float>(), d_inp.as<float>(), n);
    gpu_->gelu_backward(d_dinp.as<float>(), d_inp.as<float>(), d_dout.as<float>(), n);
    // tanhf may differ from the host's in the last ulp
    EXPECT_TRUE(all_close(download(d_out, n), out, {1e-6, 1e-5}));
    EXPECT_TRUE(all_close(download(d_dinp, n), dinp, {1e-6, 1e-5}));

    cpu_.residual_forward(out.data(), inp.data(), dout.data(), n);
    cpu_.add_inplace(out.data(), inp.data(), n);
    cpu_.scale(out.data(), 0.75f, n);
    gpu_->residual_forward(d_out.as<float>(), d_inp.as<float>(), d_dout.as<float>(), n);
    gpu_->add_inplace(d_out.as<float>(), d_inp.as<float>(), n);
    gpu_->scale(d_out.as<float>(), 0.75f, n);
    EXPECT_EQ(download(d_out, n), out);  // one rounding per element either way: exact
    gpu_->fill(d_out.as<float>(), 2.5f, n);
    EXPECT_EQ(download(d_out, n), std::vector<float>(n, 2.5f));
}

TEST_F(CudaOpsTest, Attention) {
    const int B = 2, T = 40, C = 64, NH = 4;  // T above a warp: rows loop
    const std::size_t scores = static_cast<std::size_t>(B) * NH * T * T;
    const auto qkv = random_vector(B * T * 3 * C, 22), dout = random_vector(B * T * C, 23);
    std::vector<float> out(B * T * C), preatt(scores), att(scores), dpreatt(scores), datt(scores);
    auto dqkv = random_vector(qkv.size(), 24);
    Buffer d_qkv = upload(qkv), d_dout = upload(dout), d_out = upload(out), d_preatt = upload(preatt),
           d_att = upload(att), d_dpreatt = upload(dpreatt), d_datt = upload(datt), d_dqkv = upload(dqkv);
    cpu_.attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), B, T, C, NH);
    cpu_.attention_backward(dqkv.data(), dpreatt.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
    gpu_->attention_forward(d_out.as<float>(), d_preatt.as<float>(), d_att.as<float>(), d_qkv.as<float>(), B, T, C,
                            NH);
    gpu_->attention_backward(d_dqkv.as<float>(), d_dpreatt.as<float>(), d_datt.as<float>(), d_dout.as<float>(),
                             d_qkv.as<float>(), d_att.as<float>(), B, T, C, NH);
    EXPECT_TRUE(all_close(download(d_preatt, scores), preatt));
    EXPECT_TRUE(all_close(download(d_att, scores), att));
    EXPECT_TRUE(all_close(download(d_out, out.size()), out));
    EXPECT_TRUE(all_close(download(d_dqkv, dqkv.size()), dqkv, {1e-5, 1e-3}));
}

TEST_F(CudaOpsTest, RmsnormSwigluRope) {
    const int N = 37, C = 100;  // C not a multiple of the warp
    const auto inp = random_vector(N * C, 60, -2.0f, 3.0f), weight = random_vector(C, 61), dout = random_vector(N * C, 62);
    std::vector<float> out(N * C), rstd(N);
    auto dinp = random_vector(N * C, 63), dweight = random_vector(C, 64);
    Buffer d_inp = upload(inp), d_weight = upload(weight), d_dout = upload(dout), d_out = upload(out),
           d_rstd = upload(rstd), d_dinp = upload(dinp), d_dweight = upload(dweight);
    cpu_.rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), N, C, 1e-5f);
    cpu_.rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), rstd.data(), N, C);
    gpu_->rmsnorm_forward(d_out.as<float>(), d_rstd.as<float>(), d_inp.as<float>(), d_weight.as<float>(), N, C, 1e-5f);
    gpu_->rmsnorm_backward(d_dinp.as<float>(), d_dweight.as<float>(), d_dout.as<float>(), d_inp.as<float>(),
                           d_weight.as<float>(), d_rstd.as<float>(), N, C);
    EXPECT_TRUE(all_close(download(d_out, out.size()), out));
    EXPECT_TRUE(all_close(download(d_rstd, rstd.size()), rstd));
    EXPECT_TRUE(all_close(download(d_dinp, dinp.size()), dinp, {1e-5, 1e-3}));
    EXPECT_TRUE(all_close(download(d_dweight, dweight.size()), dweight, {1e-4, 1e-3}));

    const std::size_t n = static_cast<std::size_t>(N) * C;
    std::vector<float> glu(n);
    auto dgate = random_vector(n, 65), dup = random_vector(n, 66);
    Buffer d_glu = upload(glu), d_dgate = upload(dgate), d_dup = upload(dup);
    cpu_.swiglu_forward(glu.data(), inp.data(), dout.data(), n);
    cpu_.swiglu_backward(dgate.data(), dup.data(), weight.data(), inp.data(), dout.data(), C);
    gpu_->swiglu_forward(d_glu.as<float>(), d_inp.as<float>(), d_dout.as<float>(), n);
    gpu_->swiglu_backward(d_dgate.as<float>(), d_dup.as<float>(), d_weight.as<float>(), d_inp.as<float>(),
                          d_dout.as<float>(), C);
    EXPECT_TRUE(all_close(download(d_glu, n), glu));
    EXPECT_TRUE(all_close(download(d_dgate, n), dgate));
    EXPECT_TRUE(all_close(download(d_dup, n), dup));

    const int B = 2, T = 3, H = 4, hs = 8;
    const std::vector<int> positions{4, 0, 9};
    auto x = random_vector(static_cast<std::size_t>(B) * T * H * hs, 67);
    Buffer d_x = upload(x), d_positions = upload(positions);
    cpu_.rope_forward(x.data(), positions.data(), B, T, H, hs, 500000.0f);
    gpu_->rope_forward(d_x.as<float>(), d_positions.as<int>(), B, T, H, hs, 500000.0f);
    EXPECT_TRUE(all_close(download(d_x, x.size()), x));
    cpu_.rope_backward(x.data(), positions.data(), B, T, H, hs, 500000.0f);
    gpu_->rope_backward(d_x.as<float>(), d_positions.as<int>(), B, T, H, hs, 500000.0f);
    EXPECT_TRUE(all_close(download(d_x, x.size()), x));
}

TEST_F(CudaOpsTest, GroupedQueryAttention) {
    for (const GqaShape s : {GqaShape{2, 40, 4, 2, 16, 0, 2}, GqaShape{1, 33, 2, 2, 8, 2, 2}}) {
        const auto q = random_vector(s.q_elements(), 70), k = random_vector(s.kv_elements(), 71),
                   v = random_vector(s.kv_elements(), 72), dout = random_vector(s.q_elements(), 73);
        std::vector<float> out(s.q_elements()), preatt(s.score_elements()), att(s.score_elements()),
            dpreatt(s.score_elements()), datt(s.score_elements());
        auto dq = random_vector(q.size(), 74), dk = random_vector(k.size(), 75), dv = random_vector(v.size(), 76);
        Buffer d_q = upload(q), d_k = upload(k), d_v = upload(v), d_dout = upload(dout), d_out = upload(out),
               d_preatt = upload(preatt), d_att = upload(att), d_dpreatt = upload(dpreatt), d_datt = upload(datt),
               d_dq = upload(dq), d_dk = upload(dk), d_dv = upload(dv);
        cpu_.gqa_attention_forward(out.data(), preatt.data(), att.data(), q.data(), k.data(), v.data(), s);
        cpu_.gqa_attention_backward(dq.data(), dk.data(), dv.data(), dpreatt.data(), datt.data(), dout.data(),
                                    q.data(), k.data(), v.data(), att.data(), s);
        gpu_->gqa_attention_forward(d_out.as<float>(), d_preatt.as<float>(), d_att.as<float>(), d_q.as<float>(),
                                    d_k.as<float>(), d_v.as<float>(), s);
        gpu_->gqa_attention_backward(d_dq.as<float>(), d_dk.as<float>(), d_dv.as<float>(), d_dpreatt.as<float>(),
                                     d_datt.as<float>(), d_dout.as<float>(), d_q.as<float>(), d_k.as<float>(),
                                     d_v.as<float>(), d_att.as<float>(), s);
        EXPECT_TRUE(all_close(download(d_att, att.size()), att));
        EXPECT_TRUE(all_close(download(d_out, out.size()), out));
        EXPECT_TRUE(all_close(download(d_dq, dq.size()), dq, {1e-5, 1e-3}));
        EXPECT_TRUE(all_close(download(d_dk, dk.size()), dk, {1e-5, 1e-3}));
        EXPECT_TRUE(all_close(download(d_dv, dv.size()), dv, {1e-5, 1e-3}));
    }
}

// Ring attention's pieces: causal attention over two halves of the sequence as three blocks
// (both diagonals causal, the second half's queries against the first half's keys full),
// merged, finished, and every block's backward, on the GPU against the CPU.
TEST_F(CudaOpsTest, BlockAttention) {
    const GqaShape s{2, 48, 4, 2, 16, 0, 2};
    const int L = 24;
    const AttentionBlock full = attention_block(s, L, L, 0, L, BlockMask::full);
    const AttentionBlock blocks[] = {attention_block(s, 0, L, 0, L, BlockMask::causal),
                                     attention_block(s, L, L, L, L, BlockMask::causal), full};
    const std::size_t rows = static_cast<std::size_t>(s.B) * s.T * s.NH;
    const auto q = random_vector(s.q_elements(), 110), k = random_vector(s.kv_elements(), 111),
               v = random_vector(s.kv_elements(), 112), dout = random_vector(s.q_elements(), 113);
    std::vector<float> out(s.q_elements(), 0.0f), part_out(s.q_elements(), 0.0f), part_max(rows, 0.0f),
        part_sum(rows, 0.0f), row_max(rows, -INFINITY), row_sum(rows, 0.0f), lse(rows, 0.0f), delta(rows, 0.0f),
        scratch(2 * full.tile_elements(), 0.0f);
    auto dq = random_vector(q.size(), 114), dk = random_vector(k.size(), 115), dv = random_vector(v.size(), 116);
    Buffer d_q = upload(q), d_k = upload(k), d_v = upload(v), d_dout = upload(dout), d_out = upload(out),
           d_part_out = upload(part_out), d_part_max = upload(part_max), d_part_sum = upload(part_sum),
           d_row_max = upload(row_max), d_row_sum = upload(row_sum), d_lse = upload(lse), d_delta = upload(delta),
           d_scratch = upload(scratch), d_dq = upload(dq), d_dk = upload(dk), d_dv = upload(dv);
    for (const AttentionBlock& block : blocks) {
        cpu_.block_attention_forward(part_out.data(), part_max.data(), part_sum.data(), scratch.data(), q.data(),
                                     k.data(), v.data(), block);
        cpu_.block_attention_merge(out.data(), row_max.data(), row_sum.data(), part_out.data(), part_max.data(),
                                   part_sum.data(), block);
        gpu_->block_attention_forward(d_part_out.as<float>(), d_part_max.as<float>(), d_part_sum.as<float>(),
                                      d_scratch.as<float>(), d_q.as<float>(), d_k.as<float>(), d_v.as<float>(),
                                      block);
        gpu_->block_attention_merge(d_out.as<float>(), d_row_max.as<float>(), d_row_sum.as<float>(),
                                    d_part_out.as<float>(), d_part_max.as<float>(), d_part_sum.as<float>(), block);
    }
    EXPECT_TRUE(all_close(download(d_row_max, rows), row_max));
    EXPECT_TRUE(all_close(download(d_row_sum, rows), row_sum));
    cpu_.block_attention_finish(out.data(), lse.data(), row_max.data(), row_sum.data(), rows, s.hs);
    gpu_->block_attention_finish(d_out.as<float>(), d_lse.as<float>(), d_row_max.as<float>(), d_row_sum.as<float>(),
                                 rows, s.hs);
    EXPECT_TRUE(all_close(download(d_out, out.size()), out));
    EXPECT_TRUE(all_close(download(d_lse, rows), lse));
    cpu_.block_attention_delta(delta.data(), dout.data(), out.data(), rows, s.hs);
    gpu_->block_attention_delta(d_delta.as<float>(), d_dout.as<float>(), d_out.as<float>(), rows, s.hs);
    EXPECT_TRUE(all_close(download(d_delta, rows), delta));
    for (const AttentionBlock& block : blocks) {
        cpu_.block_attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), q.data(), k.data(),
                                      v.data(), lse.data(), delta.data(), block);
        gpu_->block_attention_backward(d_dq.as<float>(), d_dk.as<float>(), d_dv.as<float>(), d_scratch.as<float>(),
                                       d_dout.as<float>(), d_q.as<float>(), d_k.as<float>(), d_v.as<float>(),
                                       d_lse.as<float>(), d_delta.as<float>(), block);
    }
    EXPECT_TRUE(all_close(download(d_dq, dq.size()), dq, {1e-5, 1e-3}));
    EXPECT_TRUE(all_close(download(d_dk, dk.size()), dk, {1e-5, 1e-3}));
    EXPECT_TRUE(all_close(download(d_dv, dv.size()), dv, {1e-5, 1e-3}));
}

TEST_F(CudaOpsTest, CopyAndAddRows) {
    const auto src = random_vector(7 * 9, 117);
    auto dst = random_vector(5 * 11, 118);
    Buffer d_src = upload(src), d_dst = upload(dst);
    cpu_.copy_rows(dst.data() + 2, 11, src.data() + 1, 9, 6, 5);
    gpu_->copy_rows(d_dst.as<float>() + 2, 11, d_src.as<float>() + 1, 9, 6, 5);
    EXPECT_TRUE(all_close(download(d_dst, dst.size()), dst));
    cpu_.add_rows(dst.data(), 11, src.data() + 3, 9, 4, 5);
    gpu_->add_rows(d_dst.as<float>(), 11, d_src.as<float>() + 3, 9, 4, 5);
    EXPECT_TRUE(all_close(download(d_dst, dst.size()), dst));
}

TEST_F(CudaOpsTest, EncoderWholeAndShard) {
    const int B = 3, T = 16, C = 40, V = 50;
    const VocabShard shard{20, 15};
    const auto tokens = random_tokens(B * T, V, 25);
    const auto wte = random_vector(V * C, 26), wpe = random_vector(T * C, 27), dout = random_vector(B * T * C, 28);
    Buffer d_tokens = upload(tokens), d_wte = upload(wte), d_wpe = upload(wpe), d_dout = upload(dout);
    for (const VocabShard s : {VocabShard{0, V}, shard}) {
        std::vector<float> out(B * T * C);
        auto dwte = random_vector(static_cast<std::size_t>(s.size) * C, 29), dwpe = random_vector(T * C, 30);
        Buffer d_out = upload(out), d_dwte = upload(dwte), d_dwpe = upload(dwpe);
        const float* wte_part = wte.data() + static_cast<std::size_t>(s.start) * C;
        cpu_.encoder_forward(out.data(), tokens.data(), wte_part, wpe.data(), B, T, C, s);
        cpu_.encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, s);
        gpu_->encoder_forward(d_out.as<float>(), d_tokens.as<int>(), d_wte.as<float>() + s.start * C,
                              d_wpe.as<float>(), B, T, C, s);
        gpu_->encoder_backward(d_dwte.as<float>(), d_dwpe.as<float>(), d_dout.as<float>(), d_tokens.as<int>(), B, T, C,
                               s);
        EXPECT_TRUE(all_close(download(d_out, out.size()), out));
        EXPECT_TRUE(all_close(download(d_dwte, dwte.size()), dwte));
        EXPECT_TRUE(all_close(download(d_dwpe, dwpe.size()), dwpe));
    }
}

TEST_F(CudaOpsTest, Crossentropy) {
    const int BT = 33, V = 300;
    const auto logits = random_vector(BT * V, 31, -5.0f, 5.0f), dlosses = random_vector(BT, 32);
    const auto targets = random_tokens(BT, V, 33);
    std::vector<float> losses(BT), probs(BT * V);
    auto dlogits = random_vector(BT * V, 34);
    Buffer d_logits = upload(logits), d_dlosses = upload(dlosses), d_targets = upload(targets),
           d_losses = upload(losses), d_probs = upload(probs), d_dlogits = upload(dlogits);
    cpu_.crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), BT, V);
    cpu_.crossentropy_backward(dlogits.data(), dlosses.data(), probs.data(), targets.data(), BT, V);
    gpu_->crossentropy_forward(d_losses.as<float>(), d_probs.as<float>(), d_logits.as<float>(), d_targets.as<int>(),
                               BT, V);
    gpu_->crossentropy_backward(d_dlogits.as<float>(), d_dlosses.as<float>(), d_probs.as<float>(),
                                d_targets.as<int>(), BT, V);
    EXPECT_TRUE(all_close(download(d_losses, BT), losses));
    EXPECT_TRUE(all_close(download(d_probs, probs.size()), probs));
    EXPECT_TRUE(all_close(download(d_dlogits, dlogits.size()), dlogits));
}

TEST_F(CudaOpsTest, CrossentropyShardParts) {
    const int BT = 20, V = 70;  // this rank's shard of a larger vocabulary
    const VocabShard shard{100, V};
    const auto logits = random_vector(BT * V, 35, -5.0f, 5.0f), dlosses = random_vector(BT, 36);
    const auto targets = random_tokens(BT, 250, 37);  // most outside the shard
    std::vector<float> maxes(BT), sums(BT), target(BT), losses(BT);
    auto dlogits = random_vector(BT * V, 38);
    Buffer d_logits = upload(logits), d_dlosses = upload(dlosses), d_targets = upload(targets), d_maxes = upload(maxes),
           d_sums = upload(sums), d_target = upload(target), d_losses = upload(losses), d_dlogits = upload(dlogits);
    cpu_.row_max(maxes.data(), logits.data(), BT, V);
    cpu_.row_sum_exp(sums.data(), logits.data(), maxes.data(), BT, V);
    cpu_.target_logit(target.data(), logits.data(), targets.data(), BT, V, shard);
    cpu_.crossentropy_losses_from_parts(losses.data(), maxes.data(), sums.data(), target.data(), BT);
    cpu_.crossentropy_shard_backward(dlogits.data(), dlosses.data(), logits.data(), maxes.data(), sums.data(),
                                     targets.data(), BT, V, shard);
    gpu_->row_max(d_maxes.as<float>(), d_logits.as<float>(), BT, V);
    gpu_->row_sum_exp(d_sums.as<float>(), d_logits.as<float>(), d_maxes.as<float>(), BT, V);
    gpu_->target_logit(d_target.as<float>(), d_logits.as<float>(), d_targets.as<int>(), BT, V, shard);
    gpu_->crossentropy_losses_from_parts(d_losses.as<float>(), d_maxes.as<float>(), d_sums.as<float>(),
                                         d_target.as<float>(), BT);
    gpu_->crossentropy_shard_backward(d_dlogits.as<float>(), d_dlosses.as<float>(), d_logits.as<float>(),
                                      d_maxes.as<float>(), d_sums.as<float>(), d_targets.as<int>(), BT, V, shard);
    EXPECT_EQ(download(d_maxes, BT), maxes);  // a max has no rounding
    EXPECT_TRUE(all_close(download(d_sums, BT), sums));
    EXPECT_EQ(download(d_target, BT), target);
    EXPECT_TRUE(all_close(download(d_losses, BT), losses));
    EXPECT_TRUE(all_close(download(d_dlogits, dlogits.size()), dlogits));
}

TEST_F(CudaOpsTest, Mse) {
    const int N = 45, D = 70;
    const auto pred = random_vector(N * D, 39), target = random_vector(N * D, 40), dlosses = random_vector(N, 41);
    std::vector<float> losses(N);
    auto dpred = random_vector(N * D, 42);
    Buffer d_pred = upload(pred), d_target = upload(target), d_dlosses = upload(dlosses), d_losses = upload(losses),
           d_dpred = upload(dpred);
    cpu_.mse_forward(losses.data(), pred.data(), target.data(), N, D);
    cpu_.mse_backward(dpred.data(), dlosses.data(), pred.data(), target.data(), N, D);
    gpu_->mse_forward(d_losses.as<float>(), d_pred.as<float>(), d_target.as<float>(), N, D);
    gpu_->mse_backward(d_dpred.as<float>(), d_dlosses.as<float>(), d_pred.as<float>(), d_target.as<float>(), N, D);
    EXPECT_TRUE(all_close(download(d_losses, N), losses));
    EXPECT_TRUE(all_close(download(d_dpred, dpred.size()), dpred));
}

// The MoE ops (kernels/moe.cu) on a routed group with dropped assignments: routing, dispatch,
// combine and their backward, and the host copies the MoE layer syncs with.
TEST_F(CudaOpsTest, MoeRouteDispatchCombine) {
    const int N = 41, E = 6, k = 2, C = 37;
    const auto logits = random_vector(static_cast<std::size_t>(N) * E, 90, -3.0f, 3.0f);
    const auto bias = random_vector(E, 91, -0.1f, 0.1f);
    for (MoeScore score : {MoeScore::softmax, MoeScore::sigmoid}) {
        std::vector<float> scores(static_cast<std::size_t>(N) * E), weights(static_cast<std::size_t>(N) * k);
        std::vector<int> chosen(static_cast<std::size_t>(N) * k);
        Buffer d_logits = upload(logits), d_bias = upload(bias), d_scores = upload(scores), d_weights = upload(weights),
               d_chosen = upload(chosen);
        cpu_.moe_route(scores.data(), chosen.data(), weights.data(), logits.data(), bias.data(), N, E, k, score);
        gpu_->moe_route(d_scores.as<float>(), d_chosen.as<int>(), d_weights.as<float>(), d_logits.as<float>(),
                        d_bias.as<float>(), N, E, k, score);
        EXPECT_TRUE(all_close(download(d_scores, scores.size()), scores));
        EXPECT_TRUE(all_close(download(d_weights, weights.size()), weights));
        EXPECT_EQ(download<int>(d_chosen, chosen.size()), chosen);

        // Rows as the capacity leaves them: every third assignment dropped, the rest in order.
        std::vector<int> slot(chosen.size()), routed(E, 0);
        int rows = 0;
        for (std::size_t a = 0; a < slot.size(); ++a) slot[a] = a % 3 == 2 ? -1 : rows++;
        for (int e : chosen) ++routed[static_cast<std::size_t>(e)];
        const auto x = random_vector(static_cast<std::size_t>(N) * C, 92), dout = random_vector(x.size(), 93);
        const auto expert_out = random_vector(static_cast<std::size_t>(rows) * C, 94);
        std::vector<float> dispatched(expert_out.size(), 0.0f), out = random_vector(x.size(), 95),
                                                                dx = random_vector(x.size(), 96);
        std::vector<float> dexpert_out(expert_out.size()), dweights(weights.size()), dlogits(scores.size());
        Buffer d_slot = upload(slot), d_routed = upload(routed), d_x = upload(x), d_dout = upload(dout),
               d_expert_out = upload(expert_out), d_dispatched = upload(dispatched), d_out = upload(out),
               d_dx = upload(dx), d_dexpert_out = upload(dexpert_out), d_dweights = upload(dweights),
               d_dlogits = upload(dlogits);
        cpu_.moe_dispatch(dispatched.data(), x.data(), slot.data(), N, k, C);
        cpu_.moe_combine(out.data(), expert_out.data(), slot.data(), weights.data(), N, k, C);
        cpu_.moe_combine_backward(dexpert_out.data(), dweights.data(), dout.data(), expert_out.data(), slot.data(),
                                  weights.data(), N, k, C);
        cpu_.moe_dispatch_backward(dx.data(), expert_out.data(), slot.data(), N, k, C);
        cpu_.moe_route_backward(dlogits.data(), dweights.data(), scores.data(), weights.data(), chosen.data(),
                                routed.data(), 0.25, N, E, k, score);
        // The GPU's backward from the CPU's scores and weights, so only the op under test differs.
        Buffer d_cpu_scores = upload(scores), d_cpu_weights = upload(weights);
        gpu_->moe_dispatch(d_dispatched.as<float>(), d_x.as<float>(), d_slot.as<int>(), N, k, C);
        gpu_->moe_combine(d_out.as<float>(), d_expert_out.as<float>(), d_slot.as<int>(), d_cpu_weights.as<float>(), N,
                          k, C);
        gpu_->moe_combine_backward(d_dexpert_out.as<float>(), d_dweights.as<float>(), d_dout.as<float>(),
                                   d_expert_out.as<float>(), d_slot.as<int>(), d_cpu_weights.as<float>(), N, k, C);
        gpu_->moe_dispatch_backward(d_dx.as<float>(), d_expert_out.as<float>(), d_slot.as<int>(), N, k, C);
        gpu_->moe_route_backward(d_dlogits.as<float>(), d_dweights.as<float>(), d_cpu_scores.as<float>(),
                                 d_cpu_weights.as<float>(), d_chosen.as<int>(), d_routed.as<int>(), 0.25, N, E, k,
                                 score);
        EXPECT_EQ(download(d_dispatched, dispatched.size()), dispatched);  // copies: exact
        EXPECT_TRUE(all_close(download(d_out, out.size()), out));
        EXPECT_TRUE(all_close(download(d_dexpert_out, dexpert_out.size()), dexpert_out));
        EXPECT_TRUE(all_close(download(d_dweights, dweights.size()), dweights, {1e-5, 1e-4}));
        EXPECT_TRUE(all_close(download(d_dx, dx.size()), dx));
        EXPECT_TRUE(all_close(download(d_dlogits, dlogits.size()), dlogits, {1e-5, 1e-4}));

        std::vector<int> back(slot.size());
        gpu_->copy_from_host(d_chosen.as<int>(), slot.data(), slot.size() * sizeof(int));
        gpu_->copy_to_host(back.data(), d_chosen.as<int>(), back.size() * sizeof(int));
        EXPECT_EQ(back, slot);
    }
}

TEST_F(CudaOpsTest, AdamW) {
    const std::size_t n = 777;
    auto params = random_vector(n, 43), m = random_vector(n, 44, -0.1f, 0.1f), v = random_vector(n, 45, 0.0f, 0.01f);
    const auto grads = random_vector(n, 46);
    Buffer d_params = upload(params), d_grads = upload(grads), d_m = upload(m), d_v = upload(v);
    for (int step = 1; step <= 3; ++step) {
        cpu_.adamw_update(params.data(), grads.data(), m.data(), v.data(), n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
        gpu_->adamw_update(d_params.as<float>(), d_grads.as<float>(), d_m.as<float>(), d_v.as<float>(), n, 3e-4f,
                           0.9f, 0.95f, 1e-8f, 0.1f, step);
    }
    EXPECT_TRUE(all_close(download(d_params, n), params, {1e-6, 1e-5}));
    EXPECT_TRUE(all_close(download(d_m, n), m, {1e-7, 1e-5}));
    EXPECT_TRUE(all_close(download(d_v, n), v, {1e-9, 1e-5}));
}

// The first-write forms (Ops' "first writes") into buffers holding NaN: a form that read its
// target would spread it. Each against the CPU's same form; parameter gradients still +=.
TEST_F(CudaOpsTest, FirstWriteFormsIgnoreWhatTheGradientHeld) {
    const float garbage = std::nanf("");
    const int N = 64, C = 48, OC = 80;
    const auto inp = random_vector(N * C, 60), weight = random_vector(OC * C, 61), dout = random_vector(N * OC, 62);
    std::vector<float> dinp(N * C, garbage);
    auto dweight = random_vector(OC * C, 63), dbias = random_vector(OC, 64);
    Buffer d_inp = upload(inp), d_weight = upload(weight), d_dout = upload(dout), d_dinp = upload(dinp),
           d_dweight = upload(dweight), d_dbias = upload(dbias);
    cpu_.matmul_backward_overwrite_input(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                                         weight.data(), N, C, OC);
    gpu_->matmul_backward_overwrite_input(d_dinp.as<float>(), d_dweight.as<float>(), d_dbias.as<float>(),
                                          d_dout.as<float>(), d_inp.as<float>(), d_weight.as<float>(), N, C, OC);
    EXPECT_TRUE(all_close(download(d_dinp, dinp.size()), dinp));
    EXPECT_TRUE(all_close(download(d_dweight, dweight.size()), dweight));
    EXPECT_TRUE(all_close(download(d_dbias, dbias.size()), dbias));

    // the same under bf16: cuBLAS's beta 0 against the CPU's fill and +=
    std::vector<BFloat16> dout_bf16(dout.size()), inp_bf16(inp.size()), weight_bf16(weight.size());
    cpu_.cast_to_bf16(dout_bf16.data(), dout.data(), dout.size());
    cpu_.cast_to_bf16(inp_bf16.data(), inp.data(), inp.size());
    cpu_.cast_to_bf16(weight_bf16.data(), weight.data(), weight.size());
    std::vector<float> dinp_bf16(N * C, garbage);
    Buffer d_dout_bf16 = upload(dout_bf16), d_inp_bf16 = upload(inp_bf16), d_weight_bf16 = upload(weight_bf16),
           d_dinp_bf16 = upload(dinp_bf16);
    cpu_.matmul_backward_bf16_overwrite_input(dinp_bf16.data(), dweight.data(), nullptr, dout_bf16.data(),
                                              inp_bf16.data(), weight_bf16.data(), N, C, OC);
    gpu_->matmul_backward_bf16_overwrite_input(d_dinp_bf16.as<float>(), d_dweight.as<float>(), nullptr,
                                               d_dout_bf16.as<BFloat16>(), d_inp_bf16.as<BFloat16>(),
                                               d_weight_bf16.as<BFloat16>(), N, C, OC);
    EXPECT_TRUE(all_close(download(d_dinp_bf16, dinp_bf16.size()), dinp_bf16));
    EXPECT_TRUE(all_close(download(d_dweight, dweight.size()), dweight));

    const std::size_t n = 1000;
    const auto x = random_vector(n, 65, -4.0f, 4.0f), up = random_vector(n, 66), dy = random_vector(n, 67);
    std::vector<float> dx(n, garbage), dgate(n, garbage), dup(n, garbage);
    Buffer d_x = upload(x), d_up = upload(up), d_dy = upload(dy), d_dx = upload(dx), d_dgate = upload(dgate),
           d_dup = upload(dup);
    cpu_.gelu_backward_overwrite(dx.data(), x.data(), dy.data(), n);
    gpu_->gelu_backward_overwrite(d_dx.as<float>(), d_x.as<float>(), d_dy.as<float>(), n);
    EXPECT_TRUE(all_close(download(d_dx, n), dx, {1e-6, 1e-5}));
    cpu_.swiglu_backward_overwrite(dgate.data(), dup.data(), dy.data(), x.data(), up.data(), n);
    gpu_->swiglu_backward_overwrite(d_dgate.as<float>(), d_dup.as<float>(), d_dy.as<float>(), d_x.as<float>(),
                                    d_up.as<float>(), n);
    EXPECT_TRUE(all_close(download(d_dgate, n), dgate, {1e-6, 1e-5}));
    EXPECT_TRUE(all_close(download(d_dup, n), dup, {1e-6, 1e-5}));

    const int BT = 20, V = 70;
    const VocabShard shard{100, V};
    const auto logits = random_vector(BT * V, 68, -5.0f, 5.0f), dlosses = random_vector(BT, 69);
    const auto targets = random_tokens(BT, 250, 70);
    std::vector<float> maxes(BT), sums(BT), dlogits(BT * V, garbage);
    cpu_.row_max(maxes.data(), logits.data(), BT, V);
    cpu_.row_sum_exp(sums.data(), logits.data(), maxes.data(), BT, V);
    Buffer d_logits = upload(logits), d_dlosses = upload(dlosses), d_targets = upload(targets), d_maxes = upload(maxes),
           d_sums = upload(sums), d_dlogits = upload(dlogits);
    cpu_.crossentropy_shard_backward_overwrite(dlogits.data(), dlosses.data(), logits.data(), maxes.data(),
                                               sums.data(), targets.data(), BT, V, shard);
    gpu_->crossentropy_shard_backward_overwrite(d_dlogits.as<float>(), d_dlosses.as<float>(), d_logits.as<float>(),
                                                d_maxes.as<float>(), d_sums.as<float>(), d_targets.as<int>(), BT, V,
                                                shard);
    EXPECT_TRUE(all_close(download(d_dlogits, dlogits.size()), dlogits));
}

// The bias gradient's column sums (32 warps per 32 columns): rows not a multiple of the warps,
// columns not of 32, from fp32 and from bf16 output gradients. Sums of 1000 terms of up to 1 in
// two orders (row by row on the CPU; 32 strided partial sums, then those, on the GPU) differ by
// up to 8e-5 (emulated on the host over 10 draws), so 3e-4 absolute.
TEST_F(CudaOpsTest, BiasGradientOverManyRowsAndColumns) {
    const int N = 1000, C = 3, OC = 1050;
    const auto dout = random_vector(static_cast<std::size_t>(N) * OC, 75);
    auto dbias = random_vector(OC, 76), dbias_bf16 = dbias;
    Buffer d_dout = upload(dout), d_dbias = upload(dbias), d_dbias_bf16 = upload(dbias_bf16);
    cpu_.matmul_backward(nullptr, nullptr, dbias.data(), dout.data(), nullptr, nullptr, N, C, OC);
    gpu_->matmul_backward(nullptr, nullptr, d_dbias.as<float>(), d_dout.as<float>(), nullptr, nullptr, N, C, OC);
    const Tolerance sums_of_1000{3e-4, 1e-4};
    EXPECT_TRUE(all_close(download(d_dbias, OC), dbias, sums_of_1000));
    std::vector<BFloat16> dout_bf16(dout.size());
    cpu_.cast_to_bf16(dout_bf16.data(), dout.data(), dout.size());
    Buffer d_dout_bf16 = upload(dout_bf16);
    cpu_.matmul_backward_bf16(nullptr, nullptr, dbias_bf16.data(), dout_bf16.data(), nullptr, nullptr, N, C, OC);
    gpu_->matmul_backward_bf16(nullptr, nullptr, d_dbias_bf16.as<float>(), d_dout_bf16.as<BFloat16>(), nullptr,
                               nullptr, N, C, OC);
    EXPECT_TRUE(all_close(download(d_dbias_bf16, OC), dbias_bf16, sums_of_1000));
}

TEST_F(CudaOpsTest, AdamWClearingGradsUpdatesAndZeroesTheGradients) {
    const std::size_t n = 777;
    auto params = random_vector(n, 71), m = random_vector(n, 72, -0.1f, 0.1f), v = random_vector(n, 73, 0.0f, 0.01f);
    const auto grads = random_vector(n, 74);
    Buffer d_params = upload(params), d_grads = upload(grads), d_m = upload(m), d_v = upload(v);
    cpu_.adamw_update(params.data(), grads.data(), m.data(), v.data(), n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 2);
    gpu_->adamw_update_clearing_grads(d_params.as<float>(), d_grads.as<float>(), d_m.as<float>(), d_v.as<float>(), n,
                                      3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 2);
    EXPECT_TRUE(all_close(download(d_params, n), params, {1e-6, 1e-5}));
    EXPECT_TRUE(all_close(download(d_m, n), m, {1e-7, 1e-5}));
    EXPECT_TRUE(all_close(download(d_v, n), v, {1e-9, 1e-5}));
    EXPECT_EQ(download(d_grads, n), std::vector<float>(n, 0.0f));
}

}  // namespace
}  // namespace parbench

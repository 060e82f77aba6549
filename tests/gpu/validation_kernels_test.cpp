// The validation kernels against the CPU loops over the same formulas: a buffer filled on
// the GPU must be bit-identical to one filled by CpuDevice, and both must count the same
// wrong elements in the same data.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "device/cpu_device.hpp"
#include "device/cuda_device.hpp"
#include "gpu_test_environment.hpp"

namespace parbench::testing_gpu {
namespace {

class ValidationKernelsTest : public GpuTest {
  protected:
    CudaDevice& gpu() { return static_cast<CudaDevice&>(*environment().nccl().device); }
    CpuDevice cpu;
};

// Past index 1000003, where input_value's index wraps, and not a multiple of any block size.
constexpr std::size_t count = 1000003 + 4099;

std::vector<InputPattern> patterns(DType type) {
    std::vector<InputPattern> result;
    for (ReduceOp op : all_reduce_ops()) {
        if (reduce_op_unsupported_reason(op, type)) continue;
        result.push_back({op, true, 5, 3, choose_modulus(type, op, true, 5)});
    }
    result.push_back({ReduceOp::sum, false, 4, 2, choose_modulus(type, ReduceOp::sum, false, 4)});
    return result;
}

std::vector<char> gpu_bytes(CudaDevice& gpu, const Buffer& buffer) {
    std::vector<char> host(buffer.bytes());
    gpu.copy_to_host(host.data(), buffer, host.size());
    return host;
}

TEST_F(ValidationKernelsTest, FillMatchesTheCpuBitForBit) {
    for (DType type : all_dtypes()) {
        for (const InputPattern& pattern : patterns(type)) {
            const std::size_t offset = 3;  // the fill starts inside the buffer
            Buffer on_gpu = gpu().allocate((count + offset) * dtype_size(type));
            Buffer on_cpu = cpu.allocate((count + offset) * dtype_size(type));
            gpu().fill_input(on_gpu, offset, count, type, pattern);
            cpu.fill_input(on_cpu, offset, count, type, pattern);
            const auto filled = gpu_bytes(gpu(), on_gpu);
            EXPECT_EQ(std::memcmp(filled.data(), on_cpu.data(), on_cpu.bytes()), 0)
                << dtype_name(type) << " " << reduce_op_name(pattern.op) << (pattern.reducing ? " reducing" : "");
        }
    }
}

// The same bytes, checked on both devices against a layout they partly match, must give the
// same count: the reduced layouts exercise expected_value and avg's tolerance on the GPU.
TEST_F(ValidationKernelsTest, CountWrongMatchesTheCpu) {
    for (DType type : all_dtypes()) {
        for (const InputPattern& pattern : patterns(type)) {
            Buffer on_cpu = cpu.allocate(count * dtype_size(type));
            cpu.fill_input(on_cpu, 0, count, type, pattern);
            // Corrupt every 1000th element so that some, not all, are wrong.
            for (std::size_t k = 0; k < count; k += 1000)
                store_element(on_cpu.data(), k, type, load_element(on_cpu.data(), k, type) + 1);
            Buffer on_gpu = gpu().allocate(on_cpu.bytes());
            gpu().copy_from_host(on_gpu, on_cpu.data(), on_cpu.bytes());

            ExpectedLayout as_filled;
            as_filled.pattern = pattern;
            as_filled.fixed_source_rank = pattern.rank;
            ExpectedLayout reduced = as_filled;
            reduced.reduced = pattern.reducing;
            ExpectedLayout blocks = as_filled;
            blocks.source_rank_from_block = true;
            blocks.block = count / pattern.nranks + 1;
            blocks.index_within_block = true;
            blocks.index_offset = 11;
            for (const ExpectedLayout& layout : {as_filled, reduced, blocks}) {
                const std::size_t cpu_wrong = cpu.count_wrong(on_cpu, 0, count, type, layout);
                const std::size_t gpu_wrong = gpu().count_wrong(on_gpu, 0, count, type, layout);
                EXPECT_EQ(gpu_wrong, cpu_wrong) << dtype_name(type) << " " << reduce_op_name(pattern.op);
            }
            EXPECT_EQ(gpu().count_wrong(on_gpu, 0, count, type, as_filled), (count + 999) / 1000)
                << dtype_name(type) << ": exactly the corrupted elements are wrong";
            ExpectedLayout from_one = as_filled;
            from_one.index_offset = 1;
            EXPECT_EQ(gpu().count_wrong(on_gpu, 1, 999, type, from_one), 0u)
                << dtype_name(type) << ": elements 1..999 are intact";
        }
    }
}

}  // namespace
}  // namespace parbench::testing_gpu

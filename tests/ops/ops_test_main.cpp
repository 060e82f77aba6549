// The ops tests' main: says which kernel path the CpuOps of this run take (PARBENCH_CPU_KERNELS,
// device/cpu_kernels.hpp) and which kernels OpenBLAS chose, so a log tells what was proven; a path this CPU
// cannot execute skips the whole run (exit 77, CTest's SKIP_RETURN_CODE) saying why.
// PARBENCH_EXPECT_CPU_KERNELS: the path the run must take (a baseline build must not run wider).
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "core/error.hpp"
#include "device/cpu_kernels.hpp"
#include "train/ops/cpu_ops.hpp"

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    try {
        const parbench::CpuKernelChoice choice = parbench::choose_cpu_kernels();
        const parbench::CpuOps ops(choice.kernels);
        const parbench::BlasLibrary blas = parbench::blas_library();
        std::cout << "CPU kernels: " << parbench::cpu_kernels_name(ops.kernels())
                  << " (asked: " << parbench::describe(choice)
                  << "); OpenBLAS core: " << (blas.core.empty() ? "none" : blas.core) << '\n';
        const char* expected = std::getenv("PARBENCH_EXPECT_CPU_KERNELS");
        if (expected != nullptr && std::string(expected) != parbench::cpu_kernels_name(ops.kernels())) {
            std::cout << "error: PARBENCH_EXPECT_CPU_KERNELS=" << expected << " but the ops take "
                      << parbench::cpu_kernels_name(ops.kernels()) << '\n';
            return 1;
        }
    } catch (const parbench::UsageError& error) {
        std::cout << "skipped: " << error.what() << '\n';
        return 77;
    }
    return RUN_ALL_TESTS();
}

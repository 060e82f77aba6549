// The kernel paths (device/cpu_kernels.hpp): what this CPU runs, the variable that forces one, and CpuOps
// taking the path it is given (the tests of the other files run on whichever path PARBENCH_CPU_KERNELS names:
// tests/ops/CMakeLists.txt runs them once per path).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "device/cpu_kernels.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

// Sets an environment variable for one test and puts the old value back.
class ScopedVariable {
  public:
    ScopedVariable(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        setenv(name, value, 1);
    }
    ~ScopedVariable() {
        if (old_)
            setenv(name_, old_->c_str(), 1);
        else
            unsetenv(name_);
    }

  private:
    const char* name_;
    std::optional<std::string> old_;
};

TEST(CpuKernels, NamesParseBackAndNothingElseDoes) {
    for (CpuKernels kernels : {CpuKernels::baseline, CpuKernels::avx2, CpuKernels::avx512})
        EXPECT_EQ(parse_cpu_kernels(cpu_kernels_name(kernels)), kernels);
    EXPECT_FALSE(parse_cpu_kernels("sse2"));
    EXPECT_FALSE(parse_cpu_kernels("AVX2"));
    EXPECT_FALSE(parse_cpu_kernels(""));
}

TEST(CpuKernels, EveryCpuRunsTheBaselineAndAvx512ImpliesAvx2) {
    const std::vector<CpuKernels> runnable = cpu_kernels_runnable();
    ASSERT_FALSE(runnable.empty());
    EXPECT_EQ(runnable.front(), CpuKernels::baseline);
    for (std::size_t i = 1; i < runnable.size(); ++i) EXPECT_LT(runnable[i - 1], runnable[i]);
    if (runnable.back() == CpuKernels::avx512) {
        EXPECT_EQ(runnable.size(), 3u);
    }
}

TEST(CpuKernels, TheVariablePicksARunnablePathAndRefusesOthersNamingItself) {
    {
        ScopedVariable unset("PARBENCH_CPU_KERNELS", "");
        const CpuKernelChoice widest = choose_cpu_kernels();
        EXPECT_FALSE(widest.forced);
        EXPECT_EQ(widest.kernels, cpu_kernels_runnable().back());
        EXPECT_NE(describe(widest).find("the widest this CPU runs"), std::string::npos);
    }
    {
        ScopedVariable baseline("PARBENCH_CPU_KERNELS", "baseline");
        const CpuKernelChoice choice = choose_cpu_kernels();
        EXPECT_TRUE(choice.forced);
        EXPECT_EQ(choice.kernels, CpuKernels::baseline);
        EXPECT_NE(describe(choice).find("PARBENCH_CPU_KERNELS"), std::string::npos);
    }
    ScopedVariable bad("PARBENCH_CPU_KERNELS", "sse4");
    try {
        choose_cpu_kernels();
        FAIL() << "PARBENCH_CPU_KERNELS=sse4 was accepted";
    } catch (const UsageError& error) {
        EXPECT_NE(std::string(error.what()).find("PARBENCH_CPU_KERNELS=sse4"), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find("baseline, avx2 or avx512"), std::string::npos) << error.what();
    }
}

// CpuOps takes the path asked for (up to what this build holds); a path the CPU cannot execute is refused
// rather than run into an illegal instruction.
TEST(CpuKernels, CpuOpsTakesEachRunnablePath) {
    for (CpuKernels kernels : cpu_kernels_runnable())
        EXPECT_EQ(CpuOps(kernels).kernels(), std::min(kernels, CpuOps::widest_built()));
    if (cpu_kernels_runnable().back() != CpuKernels::avx512) {
        EXPECT_THROW(CpuOps{CpuKernels::avx512}, std::logic_error);
    }
}

// OpenBLAS says which kernels it picked: recorded in reports beside the ops' path.
TEST(CpuKernels, OpenBlasNamesItsCore) {
    const BlasLibrary blas = blas_library();
    if (blas.config == "not OpenBLAS") GTEST_SKIP() << "the BLAS linked is not OpenBLAS";
    EXPECT_NE(blas.config.find("OpenBLAS"), std::string::npos) << blas.config;
    EXPECT_FALSE(blas.core.empty());
}

}  // namespace
}  // namespace parbench

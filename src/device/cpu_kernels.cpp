#include "device/cpu_kernels.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>

#include "core/error.hpp"

namespace parbench {
namespace {

constexpr const char* variable = "PARBENCH_CPU_KERNELS";

bool cpu_runs(CpuKernels kernels) {
#if defined(__x86_64__) && defined(__GNUC__)
    switch (kernels) {
        case CpuKernels::baseline:
            return true;
        case CpuKernels::avx2:
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case CpuKernels::avx512:
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx512f");
    }
    return false;
#else
    return kernels == CpuKernels::baseline;
#endif
}

// A function of the loaded OpenBLAS returning a C string, or null where the BLAS is another.
const char* openblas_text(const char* function) {
    using Getter = char* (*)();
    void* symbol = dlsym(RTLD_DEFAULT, function);
    return symbol != nullptr ? reinterpret_cast<Getter>(symbol)() : nullptr;
}

}  // namespace

std::string_view cpu_kernels_name(CpuKernels kernels) {
    switch (kernels) {
        case CpuKernels::baseline:
            return "baseline";
        case CpuKernels::avx2:
            return "avx2";
        case CpuKernels::avx512:
            return "avx512";
    }
    return "unknown";
}

std::optional<CpuKernels> parse_cpu_kernels(std::string_view name) {
    for (CpuKernels kernels : {CpuKernels::baseline, CpuKernels::avx2, CpuKernels::avx512})
        if (name == cpu_kernels_name(kernels)) return kernels;
    return std::nullopt;
}

std::vector<CpuKernels> cpu_kernels_runnable() {
    std::vector<CpuKernels> runnable;
    for (CpuKernels kernels : {CpuKernels::baseline, CpuKernels::avx2, CpuKernels::avx512})
        if (cpu_runs(kernels)) runnable.push_back(kernels);
    return runnable;
}

CpuKernelChoice choose_cpu_kernels() {
    const std::vector<CpuKernels> runnable = cpu_kernels_runnable();
    const char* value = std::getenv(variable);
    if (value == nullptr || *value == '\0') return {runnable.back(), false};
    const std::optional<CpuKernels> asked = parse_cpu_kernels(value);
    if (!asked)
        throw UsageError(std::string(variable) + "=" + value + ": not a kernel path; use baseline, avx2 or avx512 " +
                         "(or unset it for the widest this CPU runs)");
    if (std::find(runnable.begin(), runnable.end(), *asked) == runnable.end())
        throw UsageError(std::string(variable) + "=" + value + ": this CPU cannot execute it; it runs up to " +
                         std::string(cpu_kernels_name(runnable.back())));
    return {*asked, true};
}

std::string describe(const CpuKernelChoice& choice) {
    const std::string widest(cpu_kernels_name(cpu_kernels_runnable().back()));
    if (!choice.forced) return std::string(cpu_kernels_name(choice.kernels)) + " (the widest this CPU runs)";
    return std::string(cpu_kernels_name(choice.kernels)) + " (" + variable + "; this CPU runs up to " + widest + ")";
}

BlasLibrary blas_library() {
    const char* config = openblas_text("openblas_get_config");
    const char* core = openblas_text("openblas_get_corename");
    return {config != nullptr ? config : "not OpenBLAS", core != nullptr ? core : ""};
}

}  // namespace parbench

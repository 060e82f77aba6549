#include "device/cuda_plugin.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

// Declared weak here: a binary that links the CUDA objects itself (the GPU tests,
// parbench-ops) defines the entry point, and its address is then non-null; in parbench it
// stays undefined (null) and the plugin file is opened instead.
extern "C" const parbench::CudaPluginEntries* parbench_cuda_plugin_entries() __attribute__((weak));

namespace parbench {
namespace {

// PARBENCH_CUDA_PLUGIN_NAME is defined (for this file only) in builds that make the plugin.
#if defined(PARBENCH_CUDA_PLUGIN_NAME)
CudaPlugin checked(const CudaPluginEntries* entries, const std::string& origin) {
    if (entries == nullptr) return {true, nullptr, origin + ": its entry table is empty", origin};
    if (entries->interface_version != cuda_plugin_interface_version)
        return {true, nullptr,
                origin + " speaks interface " + std::to_string(entries->interface_version) + ", this parbench " +
                    std::to_string(cuda_plugin_interface_version) +
                    ": it is left over from another build; rebuild (cmake --build BUILD) so both match",
                origin};
    return {true, entries, "", origin};
}

CudaPlugin load_cuda_plugin() {
    if (parbench_cuda_plugin_entries != nullptr) return checked(parbench_cuda_plugin_entries(), "linked in");
    // Beside the binary, wherever it was installed or built: /proc/self/exe is the binary
    // itself, not the symbolic link or relative path it was started by.
    std::error_code error;
    const std::filesystem::path binary = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error)
        return {true, nullptr, "cannot locate the CUDA plugin: reading /proc/self/exe failed: " + error.message(), ""};
    const std::string path = (binary.parent_path() / PARBENCH_CUDA_PLUGIN_NAME).string();
    // RTLD_NOW: a plugin whose symbols do not resolve fails here, with the name of the
    // missing one, not at its first call. RTLD_LOCAL: its symbols stay its own.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* why = dlerror();
        return {true, nullptr,
                "the CUDA plugin did not load (" + std::string(why != nullptr ? why : path) +
                    "): keep " PARBENCH_CUDA_PLUGIN_NAME " beside the parbench binary (cmake --build builds both)",
                path};
    }
    using EntryPoint = const CudaPluginEntries* (*)();
    auto* entry = reinterpret_cast<EntryPoint>(dlsym(handle, "parbench_cuda_plugin_entries"));
    if (entry == nullptr) return {true, nullptr, path + " has no parbench_cuda_plugin_entries: not a parbench plugin", path};
    return checked(entry(), path);
}
#else
CudaPlugin load_cuda_plugin() {
    return {false, nullptr, "this parbench was built without CUDA (PARBENCH_CUDA=OFF or no nvcc found at configure time)",
            ""};
}
#endif

}  // namespace

const CudaPlugin& cuda_plugin() {
    // Loaded once per process, then read-only.
    static const CudaPlugin plugin = load_cuda_plugin();
    return plugin;
}

bool nvidia_driver_present() {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", error)) {
        (void)entry;
        return true;
    }
    return access("/dev/nvidiactl", F_OK) == 0;
}

GpuAvailability gpu_availability() {
    if (!nvidia_driver_present()) return {};
    const CudaPlugin& plugin = cuda_plugin();
    if (!plugin.built) return {};  // built for the CPU alone: that was chosen at build time
    if (plugin.entries == nullptr) return {0, plugin.unavailable_reason};
    return plugin.entries->gpu_availability();
}

}  // namespace parbench

// Host memory and the steady clock: the device of the MPI backend.
#pragma once

#include "device/device.hpp"

namespace parbench {

class CpuDevice : public Device {
  public:
    // `pages`: what the buffers ask for (device/host_pages.hpp); normal is what a plain program gets.
    explicit CpuDevice(BufferPages pages = BufferPages::normal) : pages_(pages) {}
    std::string kind() const override { return "cpu"; }
    std::string name() const override;
    bool is_gpu() const override { return false; }
    Buffer allocate(std::size_t bytes) override;
    void copy_to_host(void* host, const Buffer& source, std::size_t bytes) const override;
    void copy_from_host(Buffer& target, const void* host, std::size_t bytes) const override;
    void copy(Buffer& target, std::size_t target_offset, const Buffer& source, std::size_t source_offset,
              std::size_t bytes) const override;
    void fill_zero(Buffer& target) const override;
    void synchronize() const override {}
    std::unique_ptr<Timer> make_timer() const override;
    // The host's MemAvailable (/proc/meminfo).
    std::optional<DeviceMemory> free_memory() const override;
    // A 4 MiB probe allocated as allocate() does, its huge pages read back from /proc/self/smaps.
    std::optional<PageReadBack> read_back_pages() const override;
    void fill_input(Buffer& target, std::size_t offset_elements, std::size_t count, DType type,
                    const InputPattern& pattern) const override;
    std::size_t count_wrong(const Buffer& result, std::size_t offset_elements, std::size_t count, DType type,
                            const ExpectedLayout& layout) const override;

  private:
    BufferPages pages_;
};

// "model name" from /proc/cpuinfo, or "unknown cpu".
std::string cpu_model_name();

}  // namespace parbench

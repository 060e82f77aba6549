// Where buffers live and how time is measured on them. The collective harness and the
// training engine talk to this interface only, so the same code runs on host memory
// (CpuDevice, steady clock) and GPU memory (CudaDevice, CUDA events on one stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/dtype.hpp"
#include "device/host_pages.hpp"
#include "kernels/validation_data.hpp"

namespace parbench {

class Device;

// Owns device memory; freed by the device that made it when the buffer goes away.
class Buffer {
  public:
    Buffer() = default;
    Buffer(void* data, std::size_t bytes, std::shared_ptr<void> owner)
        : data_(data), bytes_(bytes), owner_(std::move(owner)) {}
    void* data() const { return data_; }
    std::size_t bytes() const { return bytes_; }
    template <typename T>
    T* as() const { return static_cast<T*>(data_); }

  private:
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
    std::shared_ptr<void> owner_;
};

// Measures the time between start() and stop() as the device sees it: for a GPU, events
// on the device's stream, so only work on that stream is timed.
class Timer {
  public:
    virtual ~Timer() = default;
    virtual void start() = 0;
    virtual void stop() = 0;
    // Waits for stop() to complete on the device, then returns microseconds.
    virtual double elapsed_us() = 0;
};

// Work recorded once and replayed (a CUDA graph): launch overhead measured apart.
class CapturedWork {
  public:
    virtual ~CapturedWork() = default;
    virtual void replay() = 0;
};

// The memory a device's buffers come from, as free now; what the resource check divides
// among the ranks that share it.
struct DeviceMemory {
    std::uint64_t free_bytes = 0;
    std::string what;  // "MemAvailable", "free memory of GPU 0 (NVIDIA H200)"
    // Ranks on one host with the same id share this memory: "host" for the host's memory, the
    // GPU's UUID for a GPU's (two ranks may see one GPU under different ordinals).
    std::string id;
    bool is_host_memory = false;  // the host's own: host-side needs come out of it too
};

// Which pages a device's host buffers were found on (device/host_pages.hpp): a probe buffer,
// allocated as the run's buffers are, read back from the kernel.
struct PageReadBack {
    BufferPages requested = BufferPages::normal;
    ThpSetting thp;
    std::uint64_t probe_bytes = 0;
    std::uint64_t probe_huge_capacity = 0;         // its bytes that whole huge pages could back
    std::optional<std::uint64_t> probe_huge_bytes;  // nullopt: /proc/self/smaps could not be read
};

class Device {
  public:
    virtual ~Device() = default;
    virtual std::string kind() const = 0;  // "cpu" or "cuda"
    virtual std::string name() const = 0;  // CPU model or GPU name
    virtual bool is_gpu() const = 0;
    // Library and driver versions worth reporting, e.g. {"cuda_runtime": "13.0"}.
    virtual std::map<std::string, std::string> versions() const { return {}; }

    // Allocated memory is touched before it is returned, so no first-touch page fault is
    // ever timed (slow first touch is a documented quirk of the machines here).
    virtual Buffer allocate(std::size_t bytes) = 0;
    virtual void copy_to_host(void* host, const Buffer& source, std::size_t bytes) const = 0;
    virtual void copy_from_host(Buffer& target, const void* host, std::size_t bytes) const = 0;
    virtual void copy(Buffer& target, std::size_t target_offset, const Buffer& source, std::size_t source_offset,
                      std::size_t bytes) const = 0;
    virtual void fill_zero(Buffer& target) const = 0;
    virtual void synchronize() const = 0;
    virtual std::unique_ptr<Timer> make_timer() const = 0;
    // nullopt where it cannot be read (then nothing is refused for want of it).
    virtual std::optional<DeviceMemory> free_memory() const = 0;
    // nullopt where buffers are device memory (a GPU's), which no page policy applies to.
    virtual std::optional<PageReadBack> read_back_pages() const { return std::nullopt; }

    // Records what `work` enqueues on the device's stream without running it; empty
    // when the device cannot capture (the CPU), and the caller says why to the user.
    virtual std::unique_ptr<CapturedWork> capture(const std::function<void()>& work) const {
        (void)work;
        return nullptr;
    }

    // Validation data, written and checked where the data lives (kernels on a GPU) with the
    // shared formulas of kernels/validation_data.hpp.
    virtual void fill_input(Buffer& target, std::size_t offset_elements, std::size_t count, DType type,
                            const InputPattern& pattern) const = 0;
    virtual std::size_t count_wrong(const Buffer& result, std::size_t offset_elements, std::size_t count,
                                    DType type, const ExpectedLayout& layout) const = 0;
};

}  // namespace parbench

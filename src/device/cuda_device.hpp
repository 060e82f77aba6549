// One GPU as a Device: memory from cudaMalloc, and every copy, fill, kernel and timer event
// on one dedicated non-blocking stream, so the work parbench times is exactly the work it
// put on that stream (never the legacy default stream, which would serialise with others).
// The NCCL communicator of the same rank enqueues on this stream too (shared ownership of
// the stream keeps it alive for whichever of the two goes last).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>

#include "device/cuda_check.hpp"
#include "device/device.hpp"

namespace parbench {

// An owned CUDA stream, non-blocking with respect to the legacy default stream.
class CudaStream {
  public:
    explicit CudaStream(int device);
    ~CudaStream();
    CudaStream(const CudaStream&) = delete;
    CudaStream& operator=(const CudaStream&) = delete;
    cudaStream_t get() const { return stream_; }
    int device() const { return device_; }

  private:
    int device_;
    cudaStream_t stream_ = nullptr;
};

// An owned CUDA event; without timing unless asked, since timing events cost more to record.
class CudaEvent {
  public:
    explicit CudaEvent(bool timing = false);
    ~CudaEvent();
    CudaEvent(const CudaEvent&) = delete;
    CudaEvent& operator=(const CudaEvent&) = delete;
    cudaEvent_t get() const { return event_; }

  private:
    cudaEvent_t event_ = nullptr;
};

// Waits until `stream` has finished its work, calling `check` between polls so that a
// failure elsewhere (an NCCL async error) surfaces as an exception instead of a hang, and a
// watchdog thread can still abort the job. check may be empty.
void wait_for_stream(cudaStream_t stream, const std::function<void()>& check);
// The same for the work before `event` was recorded.
void wait_for_event(cudaEvent_t event, const std::function<void()>& check);

// cudaMalloc'd memory freed by cudaFree when the last owner lets go. Running out of memory
// is reported with the free and total memory of the current GPU and the flag to change.
std::shared_ptr<void> allocate_device_memory(std::size_t bytes);

class CudaDevice : public Device {
  public:
    // Selects GPU `ordinal` (of those visible to this process) and makes its stream.
    explicit CudaDevice(int ordinal);
    ~CudaDevice() override;

    std::string kind() const override { return "cuda"; }
    std::string name() const override { return name_; }
    bool is_gpu() const override { return true; }
    std::map<std::string, std::string> versions() const override;

    Buffer allocate(std::size_t bytes) override;
    void copy_to_host(void* host, const Buffer& source, std::size_t bytes) const override;
    void copy_from_host(Buffer& target, const void* host, std::size_t bytes) const override;
    // Stream-ordered: later work on the stream sees the copy; the host does not wait.
    void copy(Buffer& target, std::size_t target_offset, const Buffer& source, std::size_t source_offset,
              std::size_t bytes) const override;
    void fill_zero(Buffer& target) const override;
    void synchronize() const override;
    std::unique_ptr<Timer> make_timer() const override;
    // cudaMemGetInfo's free memory of this GPU, identified by its UUID.
    std::optional<DeviceMemory> free_memory() const override;
    std::unique_ptr<CapturedWork> capture(const std::function<void()>& work) const override;
    void fill_input(Buffer& target, std::size_t offset_elements, std::size_t count, DType type,
                    const InputPattern& pattern) const override;
    std::size_t count_wrong(const Buffer& result, std::size_t offset_elements, std::size_t count, DType type,
                            const ExpectedLayout& layout) const override;

    int ordinal() const { return ordinal_; }
    cudaStream_t stream() const { return stream_->get(); }
    const std::shared_ptr<CudaStream>& shared_stream() const { return stream_; }
    // Called while synchronize() polls; the NCCL backend installs its async-error check here
    // so that a failed collective ends the wait with its error instead of hanging.
    void set_wait_check(std::function<void()> check) { wait_check_ = std::move(check); }

  private:
    int ordinal_;
    // Selected for the constructing thread for the device's lifetime (NCCL initialisation and
    // every CUDA call without its own scope go to it); the previous choice comes back after.
    CurrentDeviceScope selection_;
    std::string name_;
    std::string uuid_;  // "GPU-" and 32 hex digits, as nvidia-smi shows it
    std::shared_ptr<CudaStream> stream_;
    Buffer wrong_counter_;  // one unsigned long long on the GPU, for count_wrong
    std::function<void()> wait_check_;
};

}  // namespace parbench

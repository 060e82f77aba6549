#include "device/cuda_device.hpp"

#include <nccl.h>

#include <cstdio>
#include <stdexcept>
#include <thread>

#include "core/allocation_failure.hpp"
#include "core/error.hpp"
#include "device/cuda_check.hpp"
#include "kernels/validation_kernels.hpp"

namespace parbench {
namespace {

class CudaEventTimer : public Timer {
  public:
    explicit CudaEventTimer(std::shared_ptr<CudaStream> stream)
        : stream_(std::move(stream)), start_(true), stop_(true) {}
    void start() override { check_cuda(cudaEventRecord(start_.get(), stream_->get()), "cudaEventRecord(start)"); }
    void stop() override { check_cuda(cudaEventRecord(stop_.get(), stream_->get()), "cudaEventRecord(stop)"); }
    double elapsed_us() override {
        check_cuda(cudaEventSynchronize(stop_.get()), "cudaEventSynchronize(stop)");
        float ms = 0.0f;
        check_cuda(cudaEventElapsedTime(&ms, start_.get(), stop_.get()), "cudaEventElapsedTime");
        return static_cast<double>(ms) * 1000.0;
    }

  private:
    std::shared_ptr<CudaStream> stream_;
    CudaEvent start_;
    CudaEvent stop_;
};

class GraphExec {
  public:
    explicit GraphExec(cudaGraph_t graph) {
        check_cuda(cudaGraphInstantiate(&exec_, graph, 0), "cudaGraphInstantiate");
    }
    ~GraphExec() { (void)cudaGraphExecDestroy(exec_); }
    GraphExec(const GraphExec&) = delete;
    GraphExec& operator=(const GraphExec&) = delete;
    cudaGraphExec_t get() const { return exec_; }

  private:
    cudaGraphExec_t exec_ = nullptr;
};

// The graph itself is only needed until it is instantiated.
struct GraphDeleter {
    void operator()(CUgraph_st* graph) const { (void)cudaGraphDestroy(graph); }
};
using OwnedGraph = std::unique_ptr<CUgraph_st, GraphDeleter>;

class CudaGraphWork : public CapturedWork {
  public:
    CudaGraphWork(std::shared_ptr<CudaStream> stream, const OwnedGraph& graph)
        : stream_(std::move(stream)), exec_(graph.get()) {}
    void replay() override { check_cuda(cudaGraphLaunch(exec_.get(), stream_->get()), "cudaGraphLaunch"); }

  private:
    std::shared_ptr<CudaStream> stream_;
    GraphExec exec_;
};

void check_range(const Buffer& buffer, std::size_t offset_elements, std::size_t count, DType type,
                 const char* what) {
    if ((offset_elements + count) * dtype_size(type) > buffer.bytes())
        throw std::out_of_range(std::string(what) + ": elements [" + std::to_string(offset_elements) + ", " +
                                std::to_string(offset_elements + count) + ") of " + std::string(dtype_name(type)) +
                                " exceed the buffer of " + std::to_string(buffer.bytes()) + " bytes");
}

// nvidia-smi's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
std::string uuid_text(const cudaUUID_t& uuid) {
    std::string text = "GPU-";
    char digits[3];
    for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
        std::snprintf(digits, sizeof digits, "%02x", static_cast<unsigned char>(uuid.bytes[i]));
        text += digits;
    }
    return text;
}

std::string gib(std::size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
    return text;
}

}  // namespace

CudaStream::CudaStream(int device) : device_(device) {
    CurrentDeviceScope scope(device);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

// Work still queued finishes first: cudaStreamDestroy releases the stream after it drains.
CudaStream::~CudaStream() { (void)cudaStreamDestroy(stream_); }

CudaEvent::CudaEvent(bool timing) {
    check_cuda(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
               "cudaEventCreateWithFlags");
}

CudaEvent::~CudaEvent() { (void)cudaEventDestroy(event_); }

namespace {

// Polls `query` until it answers cudaSuccess, running `check` between polls.
template <typename Query>
void poll_until_done(Query query, const char* call, const std::function<void()>& check) {
    for (;;) {
        const cudaError_t state = query();
        if (state == cudaSuccess) return;
        if (state != cudaErrorNotReady) check_cuda(state, call);
        if (check) check();
        std::this_thread::yield();
    }
}

}  // namespace

void wait_for_stream(cudaStream_t stream, const std::function<void()>& check) {
    poll_until_done([stream] { return cudaStreamQuery(stream); }, "cudaStreamQuery", check);
}

void wait_for_event(cudaEvent_t event, const std::function<void()>& check) {
    poll_until_done([event] { return cudaEventQuery(event); }, "cudaEventQuery", check);
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal), selection_(ordinal) {
    cudaDeviceProp properties{};
    check_cuda(cudaGetDeviceProperties(&properties, ordinal), "cudaGetDeviceProperties");
    name_ = properties.name;
    uuid_ = uuid_text(properties.uuid);
    stream_ = std::make_shared<CudaStream>(ordinal);
    wrong_counter_ = allocate(sizeof(unsigned long long));
}

CudaDevice::~CudaDevice() = default;

std::map<std::string, std::string> CudaDevice::versions() const {
    int driver = 0;
    int runtime = 0;
    int nccl = 0;
    check_cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
    check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    check_nccl(ncclGetVersion(&nccl), "ncclGetVersion");
    return {{"cuda_driver", cuda_version_text(driver)},
            {"cuda_runtime", cuda_version_text(runtime)},
            {"nccl", nccl_version_text(nccl)},
            {"gpu", name_}};
}

std::shared_ptr<void> allocate_device_memory(std::size_t bytes) {
    void* data = nullptr;
    const cudaError_t status = cudaMalloc(&data, bytes);
    if (status == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // clear it, so the next call does not report it again
        std::size_t free_bytes = 0;
        std::size_t total_bytes = 0;
        (void)cudaMemGetInfo(&free_bytes, &total_bytes);
        throw AllocationFailure("cudaMalloc(" + std::to_string(bytes) + " bytes) failed (" + where_this_process_runs() +
                             "): out of GPU memory, " + gib(free_bytes) + " free of " + gib(total_bytes) +
                             "; use a smaller --size/-e");
    }
    check_cuda(status, "cudaMalloc");
    return std::shared_ptr<void>(data, [](void* pointer) { (void)cudaFree(pointer); });
}

Buffer CudaDevice::allocate(std::size_t bytes) {
    CurrentDeviceScope scope(ordinal_);
    const std::size_t allocated = bytes == 0 ? 1 : bytes;
    std::shared_ptr<void> owner = allocate_device_memory(allocated);
    // Zeroed here and waited for, so no first use of fresh memory is ever timed.
    check_cuda(cudaMemsetAsync(owner.get(), 0, allocated, stream()), "cudaMemsetAsync(allocate)");
    check_cuda(cudaStreamSynchronize(stream()), "cudaStreamSynchronize(allocate)");
    void* data = owner.get();
    return Buffer(data, bytes, std::move(owner));
}

void CudaDevice::copy_to_host(void* host, const Buffer& source, std::size_t bytes) const {
    check_cuda(cudaMemcpyAsync(host, source.data(), bytes, cudaMemcpyDeviceToHost, stream()),
               "cudaMemcpyAsync(device to host)");
    wait_for_stream(stream(), wait_check_);
}

// Waits too: the caller may free or reuse `host` as soon as this returns.
void CudaDevice::copy_from_host(Buffer& target, const void* host, std::size_t bytes) const {
    check_cuda(cudaMemcpyAsync(target.data(), host, bytes, cudaMemcpyHostToDevice, stream()),
               "cudaMemcpyAsync(host to device)");
    wait_for_stream(stream(), wait_check_);
}

void CudaDevice::copy(Buffer& target, std::size_t target_offset, const Buffer& source, std::size_t source_offset,
                      std::size_t bytes) const {
    check_cuda(cudaMemcpyAsync(target.as<char>() + target_offset, source.as<char>() + source_offset, bytes,
                               cudaMemcpyDeviceToDevice, stream()),
               "cudaMemcpyAsync(device to device)");
}

void CudaDevice::fill_zero(Buffer& target) const {
    check_cuda(cudaMemsetAsync(target.data(), 0, target.bytes(), stream()), "cudaMemsetAsync(fill_zero)");
}

void CudaDevice::synchronize() const { wait_for_stream(stream(), wait_check_); }

std::unique_ptr<Timer> CudaDevice::make_timer() const {
    CurrentDeviceScope scope(ordinal_);
    return std::make_unique<CudaEventTimer>(stream_);
}

std::optional<DeviceMemory> CudaDevice::free_memory() const {
    CurrentDeviceScope scope(ordinal_);
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    return DeviceMemory{static_cast<std::uint64_t>(free_bytes),
                        "free memory of GPU " + std::to_string(ordinal_) + " (" + name_ + ", " + gib(total_bytes) +
                            " in all)",
                        uuid_, false};
}

std::unique_ptr<CapturedWork> CudaDevice::capture(const std::function<void()>& work) const {
    CurrentDeviceScope scope(ordinal_);
    // Thread-local mode: only this thread's unsafe calls are refused, so NCCL's own threads
    // and a watchdog keep working while the graph is recorded.
    check_cuda(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    cudaGraph_t raw = nullptr;
    try {
        work();
    } catch (...) {
        // Leave capture mode, or the stream stays unusable for everything that follows.
        (void)cudaStreamEndCapture(stream(), &raw);
        OwnedGraph discarded(raw);
        throw;
    }
    check_cuda(cudaStreamEndCapture(stream(), &raw),
               "cudaStreamEndCapture (captured work may only enqueue on the device's stream: no synchronize, "
               "allocation or host copy inside it)");
    const OwnedGraph graph(raw);
    return std::make_unique<CudaGraphWork>(stream_, graph);
}

void CudaDevice::fill_input(Buffer& target, std::size_t offset_elements, std::size_t count, DType type,
                            const InputPattern& pattern) const {
    check_range(target, offset_elements, count, type, "fill_input");
    CurrentDeviceScope scope(ordinal_);
    launch_fill_input(target.as<char>() + offset_elements * dtype_size(type), count, type, pattern, stream());
}

std::size_t CudaDevice::count_wrong(const Buffer& result, std::size_t offset_elements, std::size_t count, DType type,
                                    const ExpectedLayout& layout) const {
    check_range(result, offset_elements, count, type, "count_wrong");
    CurrentDeviceScope scope(ordinal_);
    auto* counter = wrong_counter_.as<unsigned long long>();
    launch_count_wrong(result.as<char>() + offset_elements * dtype_size(type), count, type, layout, counter,
                       stream());
    unsigned long long wrong = 0;
    check_cuda(cudaMemcpyAsync(&wrong, counter, sizeof wrong, cudaMemcpyDeviceToHost, stream()),
               "cudaMemcpyAsync(wrong count)");
    wait_for_stream(stream(), wait_check_);
    return static_cast<std::size_t>(wrong);
}

}  // namespace parbench

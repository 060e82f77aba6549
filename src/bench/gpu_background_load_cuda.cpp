#include "bench/gpu_background_load.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>

#include "bench/load_loop.hpp"
#include "comm/nccl_communicator.hpp"
#include "core/nvtx.hpp"
#include "device/cublas_handle.hpp"
#include "device/cuda_check.hpp"
#include "device/cuda_device.hpp"
#include "kernels/stream_triad.hpp"

namespace parbench {
namespace {

// Units on the load's stream not yet known to have finished: one running, one queued behind it,
// so the stream never idles while the host thread launches, and a stop waits for two at most.
constexpr int queue_depth = 2;

// Page-locked host memory, so that a device-to-host copy into it stays asynchronous (into
// pageable memory the copy would make the load's thread wait for its stream).
class PinnedBytes {
  public:
    explicit PinnedBytes(std::size_t count) {
        check_cuda(cudaMallocHost(reinterpret_cast<void**>(&data_), count), "cudaMallocHost(stop votes)");
    }
    ~PinnedBytes() { (void)cudaFreeHost(data_); }
    PinnedBytes(const PinnedBytes&) = delete;
    PinnedBytes& operator=(const PinnedBytes&) = delete;
    std::uint8_t* data() const { return data_; }

  private:
    std::uint8_t* data_ = nullptr;
};

CudaDevice& as_cuda_device(Device& device) {
    auto* cuda = dynamic_cast<CudaDevice*>(&device);
    if (cuda == nullptr) throw std::logic_error("make_gpu_background_load: the device is not a CudaDevice");
    return *cuda;
}

// The second communicator of a collective load, on the load's own stream; null for other loads.
std::unique_ptr<NcclCommunicator> second_communicator(const BackgroundSpec& spec, Communicator& data,
                                                      const std::shared_ptr<CudaStream>& stream) {
    if (spec.kind != BackgroundSpec::Kind::collective) return nullptr;
    auto* nccl = dynamic_cast<NcclCommunicator*>(&data);
    if (nccl == nullptr)
        throw std::logic_error("make_gpu_background_load: a collective load on a GPU needs an NCCL communicator");
    return nccl->split_onto(0, data.rank(), stream);
}

// The load's stream as a LoadQueue: units and votes enqueued on it, marks as events on it.
class StreamQueue final : public LoadQueue {
  public:
    StreamQueue(const BackgroundSpec& spec, CudaDevice& device, Communicator& data)
        : spec_(spec), stream_(std::make_shared<CudaStream>(device.ordinal())),
          comm_(second_communicator(spec, data, stream_)), elements_(background_elements(spec)) {
        CurrentDeviceScope scope(device.ordinal());
        // Small whole numbers, not zeros: a GPU multiplying zeros draws less power and may clock
        // higher than under a real model's GEMM.
        const InputPattern pattern{ReduceOp::sum, false, 1, 0, 7};
        for (Buffer* buffer : {&a_, &b_, &c_}) {
            *buffer = device.allocate(elements_ * sizeof(float));
            device.fill_input(*buffer, 0, elements_, DType::float32, pattern);
        }
        device.synchronize();  // filled on the device's stream; the load's stream reads them
        if (spec_.kind == BackgroundSpec::Kind::gemm) cublas_.emplace(stream_->get());
        if (comm_) {
            votes_ = device.allocate(1 + queue_depth);  // [0]: this rank's vote; [1 + slot]: the slot's result
            check_ = comm_->async_error_check();
        }
    }

    cudaStream_t stream() const { return stream_->get(); }
    int ranks() const { return comm_ ? comm_->size() : 1; }
    const std::function<void()>& error_check() const { return check_; }

    bool has_peers() const override { return comm_ != nullptr; }

    void enqueue_unit() override {
        switch (spec_.kind) {
            case BackgroundSpec::Kind::gemm: {
                // Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ (CudaOps' convention); for the
                // throughput only the shape matters, N x N x N either way.
                const int n = static_cast<int>(spec_.size);
                const float alpha = 1.0f;
                const float beta = 0.0f;
                check_cublas(cublasGemmEx(cublas_->get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, b_.data(),
                                          CUDA_R_32F, n, a_.data(), CUDA_R_32F, n, &beta, c_.data(), CUDA_R_32F, n,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                             "cublasGemmEx (background gemm)");
                break;
            }
            case BackgroundSpec::Kind::stream:
                launch_stream_triad(a_.as<float>(), b_.as<float>(), c_.as<float>(), elements_, stream());
                check_cuda(cudaGetLastError(), "stream_triad_kernel launch");
                break;
            case BackgroundSpec::Kind::collective:
                comm_->allreduce(a_.data(), b_.data(), elements_, DType::float32, ReduceOp::sum);
                break;
        }
    }

    void enqueue_vote(bool stopping, int slot) override {
        auto* votes = votes_.as<std::uint8_t>();
        check_cuda(cudaMemsetAsync(votes, stopping ? 1 : 0, 1, stream()), "cudaMemsetAsync(stop vote)");
        comm_->allreduce(votes, votes + 1 + slot, 1, DType::uint8, ReduceOp::min);
        check_cuda(cudaMemcpyAsync(host_votes_.data() + slot, votes + 1 + slot, 1, cudaMemcpyDeviceToHost, stream()),
                   "cudaMemcpyAsync(stop vote)");
    }

    void mark(int slot) override {
        check_cuda(cudaEventRecord(marks_[static_cast<std::size_t>(slot)].get(), stream()),
                   "cudaEventRecord(load mark)");
    }

    void wait(int slot) override { wait_for_event(marks_[static_cast<std::size_t>(slot)].get(), check_); }

    bool all_asked_to_stop(int slot) override { return host_votes_.data()[slot] == 1; }

  private:
    BackgroundSpec spec_;
    std::shared_ptr<CudaStream> stream_;      // shared with the second communicator
    std::unique_ptr<NcclCommunicator> comm_;  // collective loads only
    std::size_t elements_;
    Buffer a_, b_, c_;
    std::optional<CublasHandle> cublas_;  // gemm loads only
    Buffer votes_;
    PinnedBytes host_votes_{queue_depth};
    std::array<CudaEvent, queue_depth> marks_;
    std::function<void()> check_;  // the second communicator's asynchronous errors, while waiting
};

class CudaBackgroundLoad final : public BackgroundLoad {
  public:
    CudaBackgroundLoad(const BackgroundSpec& spec, CudaDevice& device, Communicator& data)
        : spec_(spec), ordinal_(device.ordinal()), queue_(spec, device, data),
          name_("background " + background_name(spec)) {}

    void start() override {
        units_ = 0;
        thread_.start([this](const std::atomic<bool>& stopping) {
            CurrentDeviceScope scope(ordinal_);  // this thread's CUDA calls go to the rank's GPU
            NvtxRange range(name_);
            check_cuda(cudaEventRecord(started_.get(), queue_.stream()), "cudaEventRecord(load start)");
            units_ = run_load_loop(queue_, stopping, queue_depth);
            check_cuda(cudaEventRecord(finished_.get(), queue_.stream()), "cudaEventRecord(load end)");
            wait_for_event(finished_.get(), queue_.error_check());
        });
    }

    BackgroundTally stop() override {
        thread_.stop();
        float ms = 0.0f;
        check_cuda(cudaEventElapsedTime(&ms, started_.get(), finished_.get()), "cudaEventElapsedTime(load)");
        return background_tally(spec_, queue_.ranks(), units_, static_cast<double>(ms) / 1e3);
    }

  private:
    BackgroundSpec spec_;
    int ordinal_;
    StreamQueue queue_;
    std::string name_;
    CudaEvent started_{true};
    CudaEvent finished_{true};
    std::uint64_t units_ = 0;  // written by the load's thread, read after it is joined
    LoadThread thread_;        // last: stopped before what it uses goes
};

}  // namespace

std::unique_ptr<BackgroundLoad> make_gpu_background_load(const BackgroundSpec& spec, Device& device,
                                                         Communicator& data) {
    return std::make_unique<CudaBackgroundLoad>(spec, as_cuda_device(device), data);
}

}  // namespace parbench

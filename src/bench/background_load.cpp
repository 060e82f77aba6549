#include "bench/background_load.hpp"

#include <cblas.h>

#include <array>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "core/error.hpp"
#include "core/size_parse.hpp"
#include "device/cuda_plugin.hpp"
#include "kernels/stream_triad_math.hpp"
#include "theory/bus_factor.hpp"

namespace parbench {
namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr std::uint64_t default_gemm_n = 512;
constexpr std::uint64_t default_stream_bytes = std::uint64_t{64} << 20;  // beyond a server's last-level cache
constexpr std::uint64_t default_collective_bytes = std::uint64_t{1} << 20;

}  // namespace

BackgroundSpec parse_background(const std::string& text) {
    const std::size_t colon = text.find(':');
    const std::string kind = text.substr(0, colon);
    const std::string value = colon == std::string::npos ? std::string() : text.substr(colon + 1);
    BackgroundSpec spec;
    if (kind == "gemm") {
        spec.kind = BackgroundSpec::Kind::gemm;
        spec.size = default_gemm_n;
        if (!value.empty()) {
            const bool digits = value.size() <= 5 && value.find_first_not_of("0123456789") == std::string::npos;
            if (!digits || std::stoul(value) < 16 || std::stoul(value) > 16384)
                throw UsageError("--background '" + text + "': gemm's N (the matrices are N x N) must be a whole number "
                                 "from 16 to 16384, e.g. gemm:512");
            spec.size = std::stoul(value);
        }
    } else if (kind == "stream" || kind == "collective") {
        spec.kind = kind == "stream" ? BackgroundSpec::Kind::stream : BackgroundSpec::Kind::collective;
        spec.size = kind == "stream" ? default_stream_bytes : default_collective_bytes;
        if (!value.empty()) spec.size = parse_size(value, "--background " + kind);
        if (spec.size < 64 || spec.size > (std::uint64_t{16} << 30))
            throw UsageError("--background '" + text + "': " + kind + "'s size must be from 64 B to 16G (e.g. " + kind +
                             ":64M)");
    } else {
        throw UsageError("--background '" + text + "': use gemm[:N], stream[:BYTES] or collective[:BYTES] (e.g. gemm:512, "
                         "stream:64M, collective:1M)");
    }
    return spec;
}

std::string background_name(const BackgroundSpec& spec) {
    switch (spec.kind) {
        case BackgroundSpec::Kind::gemm: return "gemm:" + std::to_string(spec.size);
        case BackgroundSpec::Kind::stream: return "stream:" + std::to_string(spec.size);
        case BackgroundSpec::Kind::collective: return "collective:" + std::to_string(spec.size);
    }
    return "?";
}

std::string background_unit(const BackgroundSpec& spec) {
    return spec.kind == BackgroundSpec::Kind::gemm ? "GFLOP/s" : "GB/s";
}

std::size_t background_elements(const BackgroundSpec& spec) {
    switch (spec.kind) {
        case BackgroundSpec::Kind::gemm: return spec.size * spec.size;
        case BackgroundSpec::Kind::stream: return spec.size / 3 / sizeof(float);
        case BackgroundSpec::Kind::collective: return spec.size / sizeof(float);
    }
    return 0;
}

double background_work_per_unit(const BackgroundSpec& spec, int ranks) {
    const double n = static_cast<double>(spec.size);
    const double bytes = static_cast<double>(background_elements(spec)) * sizeof(float);
    switch (spec.kind) {
        case BackgroundSpec::Kind::gemm: return 2.0 * n * n * n;
        case BackgroundSpec::Kind::stream: return 3.0 * bytes;
        case BackgroundSpec::Kind::collective: return bytes * collective_bus_factor("allreduce", ranks);  // bus bytes
    }
    return 0.0;
}

BackgroundTally background_tally(const BackgroundSpec& spec, int ranks, std::uint64_t units, double seconds) {
    BackgroundTally tally;
    tally.units = units;
    tally.seconds = seconds;
    tally.throughput =
        seconds > 0.0 ? static_cast<double>(units) * background_work_per_unit(spec, ranks) / seconds / 1e9 : 0.0;
    return tally;
}

std::unique_ptr<BackgroundLoad> make_background_load(const BackgroundSpec& spec, Device& device, Communicator& data) {
    if (device.is_gpu()) {
        // A GPU device was made by the CUDA plugin, so it is loaded already.
        const CudaPlugin& plugin = cuda_plugin();
        if (plugin.entries == nullptr)
            throw UsageError("--background on device kind '" + device.kind() + "': " + plugin.unavailable_reason);
        return plugin.entries->make_gpu_background_load(spec, device, data);
    }
    std::unique_ptr<Communicator> second;
    if (spec.kind == BackgroundSpec::Kind::collective) second = data.split(0, data.rank());
    return std::make_unique<CpuBackgroundLoad>(spec, device, std::move(second));
}

// The CPU's queue is the load's thread: a unit is done when enqueue_unit returns, and a vote is
// counted when enqueue_vote does, so there is nothing to wait for.
class CpuBackgroundLoad::Queue final : public LoadQueue {
  public:
    Queue(const BackgroundSpec& spec, Communicator* comm, const Buffer& a, const Buffer& b, const Buffer& c)
        : spec_(spec), comm_(comm), a_(a.as<float>()), b_(b.as<float>()), c_(c.as<float>()),
          elements_(background_elements(spec)) {}

    bool has_peers() const override { return comm_ != nullptr; }
    void enqueue_unit() override {
        switch (spec_.kind) {
            case BackgroundSpec::Kind::gemm: {
                const int n = static_cast<int>(spec_.size);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a_, n, b_, n, 0.0f, c_, n);
                break;
            }
            case BackgroundSpec::Kind::stream:
                for (std::size_t i = 0; i < elements_; ++i) a_[i] = stream_triad(b_[i], c_[i]);
                break;
            case BackgroundSpec::Kind::collective:
                comm_->allreduce(a_, b_, elements_, DType::float32, ReduceOp::sum);
                break;
        }
    }
    void enqueue_vote(bool stopping, int slot) override {
        const int mine = stopping ? 1 : 0;
        comm_->allreduce(&mine, &votes_[static_cast<std::size_t>(slot)], 1, DType::int32, ReduceOp::min);
    }
    void mark(int) override {}
    void wait(int) override {}
    bool all_asked_to_stop(int slot) override { return votes_[static_cast<std::size_t>(slot)] == 1; }

    static constexpr int depth = 2;

  private:
    BackgroundSpec spec_;
    Communicator* comm_;
    float* a_;
    float* b_;
    float* c_;
    std::size_t elements_;
    std::array<int, depth> votes_{};
};

CpuBackgroundLoad::CpuBackgroundLoad(const BackgroundSpec& spec, Device& device, std::unique_ptr<Communicator> comm)
    : spec_(spec), comm_(std::move(comm)) {
    if (spec_.kind == BackgroundSpec::Kind::collective && !comm_)
        throw std::logic_error("CpuBackgroundLoad: a collective load needs its communicator");
    const std::size_t bytes = background_elements(spec_) * sizeof(float);
    // Allocated and touched once, before anything is timed (DESIGN.md: first touch is slow).
    for (Buffer* buffer : {&a_, &b_, &c_}) {
        *buffer = device.allocate(bytes);
        std::memset(buffer->data(), 0, bytes);
    }
    queue_ = std::make_unique<Queue>(spec_, comm_.get(), a_, b_, c_);
}

CpuBackgroundLoad::~CpuBackgroundLoad() = default;

void CpuBackgroundLoad::start() {
    units_ = 0;
    started_ = now_seconds();
    thread_.start(
        [this](const std::atomic<bool>& stopping) { units_ = run_load_loop(*queue_, stopping, Queue::depth); });
}

BackgroundTally CpuBackgroundLoad::stop() {
    thread_.stop();
    return background_tally(spec_, comm_ ? comm_->size() : 1, units_, now_seconds() - started_);
}

}  // namespace parbench

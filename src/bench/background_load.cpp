#include "bench/background_load.hpp"

#include <cblas.h>

#include <chrono>
#include <cstring>

#include "core/error.hpp"
#include "core/size_parse.hpp"

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

BackgroundLoad::BackgroundLoad(const BackgroundSpec& spec, Device& device, std::unique_ptr<Communicator> comm)
    : spec_(spec), comm_(std::move(comm)) {
    if (spec_.kind == BackgroundSpec::Kind::collective && !comm_)
        throw std::logic_error("BackgroundLoad: a collective load needs its communicator");
    switch (spec_.kind) {
        case BackgroundSpec::Kind::gemm: elements_ = spec_.size * spec_.size; break;
        case BackgroundSpec::Kind::stream: elements_ = spec_.size / 3 / sizeof(float); break;
        case BackgroundSpec::Kind::collective: elements_ = spec_.size / sizeof(float); break;
    }
    const std::size_t bytes = elements_ * sizeof(float);
    // Allocated and touched once, before anything is timed (DESIGN.md: first touch is slow).
    for (Buffer* buffer : {&a_, &b_, &c_}) {
        *buffer = device.allocate(bytes);
        std::memset(buffer->data(), 0, bytes);
    }
}

BackgroundLoad::~BackgroundLoad() {
    if (thread_.joinable()) {
        stopping_ = true;
        thread_.join();
    }
}

double BackgroundLoad::work_per_unit() const {
    const double n = static_cast<double>(spec_.size);
    const double elements = static_cast<double>(elements_);
    switch (spec_.kind) {
        case BackgroundSpec::Kind::gemm: return 2.0 * n * n * n;
        case BackgroundSpec::Kind::stream: return 3.0 * elements * sizeof(float);
        case BackgroundSpec::Kind::collective: {
            const double ranks = comm_->size();
            return elements * sizeof(float) * 2.0 * (ranks - 1.0) / ranks;  // nccl-tests' allreduce bus bytes
        }
    }
    return 0.0;
}

void BackgroundLoad::one_unit() {
    auto* a = a_.as<float>();
    auto* b = b_.as<float>();
    auto* c = c_.as<float>();
    switch (spec_.kind) {
        case BackgroundSpec::Kind::gemm: {
            const int n = static_cast<int>(spec_.size);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            break;
        }
        case BackgroundSpec::Kind::stream:
            for (std::size_t i = 0; i < elements_; ++i) a[i] = b[i] + 3.0f * c[i];
            break;
        case BackgroundSpec::Kind::collective:
            comm_->allreduce(a, b, elements_, DType::float32, ReduceOp::sum);
            break;
    }
}

void BackgroundLoad::run() {
    for (;;) {
        one_unit();
        ++units_;
        if (spec_.kind != BackgroundSpec::Kind::collective) {
            if (stopping_) return;
            continue;
        }
        // Every rank leaves after the same unit: the first one after which all have asked to stop.
        const int mine = stopping_ ? 1 : 0;
        int all = 0;
        comm_->allreduce(&mine, &all, 1, DType::int32, ReduceOp::min);
        if (all == 1) return;
    }
}

void BackgroundLoad::start() {
    stopping_ = false;
    units_ = 0;
    started_ = now_seconds();
    thread_ = std::thread([this] { run(); });
}

BackgroundTally BackgroundLoad::stop() {
    stopping_ = true;
    thread_.join();
    BackgroundTally tally;
    tally.units = units_;
    tally.seconds = now_seconds() - started_;
    tally.throughput = tally.seconds > 0.0 ? static_cast<double>(tally.units) * work_per_unit() / tally.seconds / 1e9 : 0.0;
    return tally;
}

}  // namespace parbench

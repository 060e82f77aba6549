// --background's GPU loads (bench/gpu_background_load.hpp), made the way parbench makes them
// (make_background_load, through the CUDA plugin's entry table): each runs alone and beside a
// validated alltoall on the device's stream, which must stay right; the load is on a stream of
// its own (the device's stream drains while a long GEMM is still running); and a collective
// load's ranks all stop after the same unit. One rank is enough; under mpirun -np N on N GPUs the
// second communicator spans them all.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench/background_load.hpp"
#include "collectives/collective.hpp"
#include "device/cuda_device.hpp"
#include "gpu_test_environment.hpp"

namespace parbench::testing_gpu {
namespace {

// A checked alltoall on the device's stream (NCCL's send/receive kernels, even at one rank), its
// buffers made before any load starts: cudaFree waits for the whole device, a load's stream too.
class CheckedAlltoall {
  public:
    CheckedAlltoall(CudaDevice& device, Communicator& comm)
        : device_(device), comm_(comm), alltoall_(*find_collective("alltoall")),
          count_(alltoall_.count_multiple(comm.size()) * (std::size_t{1} << 18)),
          shape_(alltoall_.shape(count_, comm.size(), comm.rank(), params_)),
          pattern_{params_.op, false, comm.size(), comm.rank(),
                   choose_modulus(params_.type, params_.op, false, comm.size())},
          send_(device.allocate(shape_.send_count * 4)), recv_(device.allocate(shape_.recv_count * 4)) {
        device_.fill_input(send_, 0, shape_.send_count, params_.type, pattern_);
    }

    // `calls` alltoalls; the wrong elements of the last, over all ranks.
    std::uint64_t run(int calls, Communicator& control) {
        for (int call = 0; call < calls; ++call) {
            device_.fill_zero(recv_);
            alltoall_.run(comm_, send_.data(), recv_.data(), count_, params_);
        }
        comm_.synchronize();
        const auto layout = alltoall_.expected(count_, comm_.size(), comm_.rank(), params_, pattern_);
        std::uint64_t wrong = device_.count_wrong(recv_, 0, shape_.recv_count, params_.type, *layout);
        control.allreduce(&wrong, &wrong, 1, DType::uint64, ReduceOp::sum);
        return wrong;
    }

  private:
    CudaDevice& device_;
    Communicator& comm_;
    const Collective& alltoall_;
    const CollectiveParams params_{DType::float32, ReduceOp::sum, 0};
    std::size_t count_;
    BufferShape shape_;
    InputPattern pattern_;
    Buffer send_, recv_;
};

class GpuBackgroundLoadTest : public GpuTest {
  protected:
    CudaDevice& device() { return static_cast<CudaDevice&>(*environment().nccl().device); }
    Communicator& comm() { return *environment().nccl().comm; }
};

// Far above what any GPU reaches (fp32 without tensor cores: 67 TFLOP/s on an H100 SXM; memory:
// 8 TB/s on a B200): a figure beyond it is a miscounted tally, not a fast GPU.
double impossible(const BackgroundSpec& spec) { return spec.kind == BackgroundSpec::Kind::gemm ? 2e5 : 2e4; }

TEST_F(GpuBackgroundLoadTest, EachLoadRunsAloneAndBesideACheckedCollective) {
    for (const char* text : {"gemm:2048", "stream:256M", "collective:4M"}) {
        SCOPED_TRACE(text);
        const BackgroundSpec spec = parse_background(text);
        std::unique_ptr<BackgroundLoad> load = make_background_load(spec, device(), comm());
        load->start();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const BackgroundTally alone = load->stop();
        EXPECT_GT(alone.units, 0u);
        EXPECT_GT(alone.seconds, 0.0);
        EXPECT_LT(alone.seconds, 5.0);
        if (spec.kind != BackgroundSpec::Kind::collective || comm().size() > 1) {
            EXPECT_GT(alone.throughput, 0.0);
            EXPECT_LT(alone.throughput, impossible(spec));
        }

        CheckedAlltoall alltoall(device(), comm());
        load->start();
        EXPECT_EQ(alltoall.run(20, environment().control()), 0u) << "the collective's data went wrong under the load";
        const BackgroundTally loaded = load->stop();
        EXPECT_GT(loaded.units, 0u);
        std::printf("[ INFO     ] %s on %s: alone %.1f %s (%llu units), beside alltoall %.1f (%llu units)\n", text,
                    device().name().c_str(), alone.throughput, background_unit(spec).c_str(),
                    static_cast<unsigned long long>(alone.units), loaded.throughput,
                    static_cast<unsigned long long>(loaded.units));
    }
}

TEST_F(GpuBackgroundLoadTest, TheLoadHasAStreamOfItsOwn) {
    // A GEMM of 8192 takes milliseconds on any GPU; the device's stream, empty, drains in
    // microseconds beside it. On the device's stream it would wait for a whole GEMM.
    const BackgroundSpec spec = parse_background("gemm:8192");
    std::unique_ptr<BackgroundLoad> load = make_background_load(spec, device(), comm());
    load->start();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the stream holds a GEMM by now
    const auto before = std::chrono::steady_clock::now();
    device().synchronize();
    const double drained_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
    const BackgroundTally tally = load->stop();
    ASSERT_GT(tally.units, 0u);
    const double per_gemm_s = tally.seconds / static_cast<double>(tally.units);
    EXPECT_LT(drained_s, 0.5 * per_gemm_s) << "the device's stream waited " << drained_s * 1e3
                                           << " ms beside GEMMs of " << per_gemm_s * 1e3 << " ms";
}

TEST_F(GpuBackgroundLoadTest, ACollectiveLoadsRanksStopAfterTheSameUnit) {
    const BackgroundSpec spec = parse_background("collective:1M");
    std::unique_ptr<BackgroundLoad> load = make_background_load(spec, device(), comm());
    load->start();
    // The ranks ask to stop at different times: rank r after 20 + 30 r ms.
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + 30 * comm().rank()));
    const BackgroundTally tally = load->stop();
    EXPECT_GT(tally.units, 0u);
    std::vector<std::uint64_t> units(static_cast<std::size_t>(comm().size()));
    environment().control().allgather(&tally.units, units.data(), 1, DType::uint64);
    for (std::size_t rank = 0; rank < units.size(); ++rank)
        EXPECT_EQ(units[rank], units[0]) << "rank " << rank << " ran another number of all-reduces than rank 0";
}

}  // namespace
}  // namespace parbench::testing_gpu

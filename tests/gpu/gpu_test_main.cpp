// main() of the GPU tests: MPI first (NCCL's unique id travels over it), then the tests,
// then the NCCL backend is torn down before MPI finalises. Under mpirun only rank 0 prints.
#include <gtest/gtest.h>

#include "comm/mpi_communicator.hpp"
#include "comm/nccl_backend.hpp"
#include "device/cuda_plugin.hpp"
#include "device/gpu_inventory.hpp"
#include "gpu_test_environment.hpp"

namespace parbench::testing_gpu {
namespace {

GpuTestEnvironment*& registered() {
    static GpuTestEnvironment* environment = nullptr;
    return environment;
}

}  // namespace

GpuTestEnvironment& environment() { return *registered(); }
void set_environment(GpuTestEnvironment* environment) { registered() = environment; }

void GpuTestEnvironment::SetUp() {
    control_ = MpiCommunicator::world();
    const GpuAvailability availability = gpu_availability();
    // GPUs that exist but cannot be used are a failure to report, never a skip.
    int faults = availability.fault.empty() ? 0 : 1;
    control_->allreduce(&faults, &faults, 1, DType::int32, ReduceOp::sum);
    if (faults > 0) {
        failure_reason_ = availability.fault.empty()
                              ? "another rank's GPUs cannot be used (its own output says why)"
                              : "this host has an NVIDIA driver, but its GPUs cannot be used: " + availability.fault;
        return;
    }
    const int gpus = availability.count;
    int fewest = 0;
    control_->allreduce(&gpus, &fewest, 1, DType::int32, ReduceOp::min);
    if (fewest == 0) {
        const std::string why = query_gpu_inventory().unavailable_reason;
        skip_reason_ = "no GPU visible" + (why.empty() ? std::string() : " (" + why + ")") +
                       ": the GPU tests need a CUDA driver and at least one GPU per rank";
        return;
    }
    int worst_excess = session_.local_size() - gpus;
    int excess = 0;
    control_->allreduce(&worst_excess, &excess, 1, DType::int32, ReduceOp::max);
    if (excess > 0) {
        skip_reason_ = "a host runs more ranks than it has GPUs (" + std::to_string(session_.local_size()) +
                       " ranks, " + std::to_string(gpus) + " GPUs here): start fewer ranks";
        return;
    }
    nccl_ = make_nccl_backend(session_, *control_);
}

void GpuTestEnvironment::TearDown() {
    nccl_.reset();
    control_.reset();
}

}  // namespace parbench::testing_gpu

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    parbench::MpiSession session(argc, argv);
    if (session.world_rank() != 0) {
        auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
    }
    auto* environment = new parbench::testing_gpu::GpuTestEnvironment(session);  // owned by gtest
    parbench::testing_gpu::set_environment(environment);
    ::testing::AddGlobalTestEnvironment(environment);
    return RUN_ALL_TESTS();
}

// What the GPU tests share: MPI for the process (NCCL's bootstrap), and the NCCL backend,
// created once because communicator initialisation costs a second or more. Every test
// skips, saying why, when this process sees no GPU or fewer GPUs than its host has ranks,
// and fails when the host's GPUs exist but cannot be used (device/cuda_plugin.hpp).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "comm/mpi_communicator.hpp"
#include "comm/mpi_session.hpp"
#include "comm/nccl_backend.hpp"

namespace parbench::testing_gpu {

class GpuTestEnvironment : public ::testing::Environment {
  public:
    explicit GpuTestEnvironment(const MpiSession& session) : session_(session) {}
    void SetUp() override;
    void TearDown() override;  // before MPI_Finalize: NCCL and MPI handles go first

    const MpiSession& session() const { return session_; }
    Communicator& control() { return *control_; }
    // Why the tests cannot use a GPU here; empty when they can.
    const std::string& skip_reason() const { return skip_reason_; }
    // Why they fail: this host's GPUs exist but cannot be used; empty otherwise.
    const std::string& failure_reason() const { return failure_reason_; }
    NcclBackend& nccl() { return *nccl_; }

  private:
    const MpiSession& session_;
    std::unique_ptr<MpiCommunicator> control_;
    std::string skip_reason_;
    std::string failure_reason_;
    std::optional<NcclBackend> nccl_;
};

// The environment main() registered with gtest.
GpuTestEnvironment& environment();
void set_environment(GpuTestEnvironment* registered);

// Base of every GPU test: skips, with the reason, when no GPU is visible; fails when one is
// there but cannot be used.
class GpuTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!environment().failure_reason().empty()) GTEST_FAIL() << environment().failure_reason();
        if (!environment().skip_reason().empty()) GTEST_SKIP() << environment().skip_reason();
    }
};

}  // namespace parbench::testing_gpu

// Each of these formulas has one home (issue 33): its readers must give the same figure for every
// case, so a second copy cannot come back unnoticed.
#include <gtest/gtest.h>

#include <string>

#include "collectives/collective.hpp"
#include "plan/alpha_beta.hpp"
#include "plan/cluster.hpp"
#include "theory/gpu_peaks.hpp"
#include "theory/zero_partition.hpp"
#include "train/metrics.hpp"

namespace parbench {
namespace {

TEST(FormulaHomes, PlannerAndCollectivesReadOneBusFactor) {
    for (const Collective* collective : all_collectives())
        for (int n : {1, 2, 3, 8, 512}) {
            const std::string name(collective->name());
            EXPECT_DOUBLE_EQ(bus_factor(name, n), collective->bus_factor(n)) << name << " n=" << n;
            EXPECT_DOUBLE_EQ(bus_factor(averaged_collective(name), n), collective->bus_factor(n)) << name;
        }
    EXPECT_DOUBLE_EQ(collective_bus_factor("allreduce", 4), 1.5);
    EXPECT_DOUBLE_EQ(collective_bus_factor("alltoallv", 4), 0.75);
    EXPECT_DOUBLE_EQ(collective_bus_factor("sendrecv", 4), 1.0);
}

TEST(FormulaHomes, PlannerPresetsAndTrainMfuReadOnePeakTable) {
    for (const std::string& name : device_preset_names()) {
        const DeviceSpec spec = device_preset(name);
        const auto bf16 = known_gpu_peak("NVIDIA " + name, "bf16");
        const auto fp32 = known_gpu_peak("NVIDIA " + name, "fp32");
        ASSERT_TRUE(bf16 && fp32) << name;
        EXPECT_GT(spec.peak_tflops_bf16, 0.0) << name;
        EXPECT_DOUBLE_EQ(spec.peak_tflops_bf16, *bf16->tflops) << name;
        EXPECT_DOUBLE_EQ(spec.peak_tflops_fp32, *fp32->tflops) << name;
    }
    // The more specific name wins: a PCIe H100 is not an SXM one, an A10 not an A100.
    EXPECT_DOUBLE_EQ(find_gpu_peak("NVIDIA H100 PCIe")->bf16_tflops, 756.0);
    EXPECT_DOUBLE_EQ(find_gpu_peak("NVIDIA H100 80GB HBM3")->bf16_tflops, 989.0);
    EXPECT_STREQ(find_gpu_peak("NVIDIA A10")->label, "A10");
    EXPECT_STREQ(find_gpu_peak("NVIDIA A100-SXM4-80GB")->label, "A100");
    EXPECT_EQ(find_gpu_peak("Intel(R) Xeon(R) Processor"), nullptr);
}

TEST(FormulaHomes, ZeroPartitionRuleAndSlots) {
    // ZeRO's 16 B/param of arXiv 1910.02054 fig. 1 over 64 ranks, stage by stage.
    const ModelStates zero_bytes{2, 2, 12};
    EXPECT_DOUBLE_EQ(zero_partitioned_states(zero_bytes, 64, 0, 64).total(), 16 * 64);
    EXPECT_DOUBLE_EQ(zero_partitioned_states(zero_bytes, 64, 1, 64).total(), 2 * 64 + 2 * 64 + 12);
    EXPECT_DOUBLE_EQ(zero_partitioned_states(zero_bytes, 64, 2, 64).total(), 2 * 64 + 2 + 12);
    EXPECT_DOUBLE_EQ(zero_partitioned_states(zero_bytes, 64, 3, 64).total(), 16);
    EXPECT_EQ(zero_gradient_slots(false), 2);
    EXPECT_EQ(zero_gradient_slots(true), 3);
    EXPECT_EQ(zero_gather_slots(2, false), 2);
    EXPECT_EQ(zero_gather_slots(2, true), 3);
}

}  // namespace
}  // namespace parbench

// What NCCL chose, read from its debug log (report/nccl_choices.hpp), on the recorded-form logs of
// tests/data/nccl, and the fallback warnings each one draws.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/nccl_choices.hpp"

namespace parbench {
namespace {

std::string read_log(const std::string& name) {
    std::ifstream file(std::string(PARBENCH_TEST_DATA) + "/nccl/" + name);
    std::ostringstream text;
    text << file.rdbuf();
    EXPECT_FALSE(text.str().empty()) << name;
    return text.str();
}

bool has_warning(const std::vector<NcclWarning>& warnings, const std::string& kind, const std::string& fragment) {
    for (const NcclWarning& w : warnings)
        if (w.kind == kind && w.text.find(fragment) != std::string::npos) return true;
    return false;
}

const HostNetwork ib_host{{"mlx5_0 (mlx5_core)", "mlx5_1 (mlx5_core)"}, false};

TEST(NcclChoices, ReadsTheInitialisationAndEveryCall) {
    const NcclLogFacts facts = parse_nccl_log(read_log("h100-ib.log"));
    EXPECT_EQ(facts.version, "2.23.4+cuda12.4");
    EXPECT_EQ(facts.network, "IB");
    EXPECT_EQ(facts.network_devices,
              (std::vector<std::string>{"mlx5_0:1/IB", "mlx5_1:1/IB", "mlx5_2:1/IB", "mlx5_3:1/IB"}));
    ASSERT_TRUE(facts.nvls_available.has_value());
    EXPECT_TRUE(*facts.nvls_available);
    EXPECT_EQ(facts.set_by_environment.at("NCCL_IB_HCA"), "mlx5_0,mlx5_1,mlx5_2,mlx5_3");
    EXPECT_EQ(facts.intra_host_transports.at("P2P/IPC"), 2);
    EXPECT_EQ(facts.cross_host_transports.at("NET/IB"), 2);
    ASSERT_EQ(facts.choices.size(), 4u);
    EXPECT_EQ(facts.choices[0].algorithm, "TREE");
    EXPECT_EQ(facts.choices[0].protocol, "LL");
    EXPECT_EQ(facts.choices[0].channels, 1);
    EXPECT_EQ(facts.choices[2].bytes, 268435456u);
    EXPECT_EQ(facts.choices[2].algorithm, "NVLS");
    EXPECT_EQ(facts.choices[3].collective, "allgather");
    EXPECT_EQ(facts.choices[3].channels, 32);
    // A healthy node draws no warning.
    EXPECT_TRUE(nccl_fallback_warnings(facts, ib_host).empty());
    // The point's own choice is the last line of its collective.
    const auto choice = choice_for(facts.choices, "allreduce");
    ASSERT_TRUE(choice.has_value());
    EXPECT_EQ(choice->algorithm, "NVLS");
    EXPECT_FALSE(choice_for(facts.choices, "broadcast").has_value());
}

TEST(NcclChoices, SocketsWhereRdmaDevicesExistAreAWarningNamingTheSetting) {
    const NcclLogFacts facts = parse_nccl_log(read_log("socket-fallback.log"));
    EXPECT_EQ(facts.network, "Socket");
    EXPECT_EQ(facts.cross_host_transports.at("NET/Socket"), 2);
    const auto warnings = nccl_fallback_warnings(facts, ib_host);
    EXPECT_TRUE(has_warning(warnings, "sockets", "NCCL_IB_DISABLE=1")) << warnings.front().text;
    EXPECT_TRUE(has_warning(warnings, "sockets", "mlx5_0"));
    // Without RDMA devices sockets are the only network there is: no warning.
    EXPECT_TRUE(nccl_fallback_warnings(facts, HostNetwork{}).empty());
    // On EFA the fix is the OFI plugin, when nothing in the environment explains it.
    NcclLogFacts unexplained = facts;
    unexplained.set_by_environment.clear();
    EXPECT_TRUE(has_warning(nccl_fallback_warnings(unexplained, HostNetwork{{"rdmap16s27 (efa)"}, true}), "sockets",
                            "aws-ofi-nccl"));
}

TEST(NcclChoices, RingWhereNvlsIsAvailableIsAWarningAtLargeSizesOnly) {
    const NcclLogFacts facts = parse_nccl_log(read_log("ring-not-nvls.log"));
    const auto warnings = nccl_fallback_warnings(facts, HostNetwork{});
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_TRUE(has_warning(warnings, "nvls", "268435456 B ran on RING/SIMPLE"));
    EXPECT_TRUE(has_warning(warnings, "nvls", "NCCL_ALGO=Ring"));
    EXPECT_EQ(facts.intra_host_transports.at("P2P/CUMEM"), 1);
    // The 1 MiB call on Ring is NCCL's own choice at that size: no warning from it alone.
    NcclLogFacts small = facts;
    small.choices.pop_back();
    EXPECT_TRUE(nccl_fallback_warnings(small, HostNetwork{}).empty());
}

TEST(NcclChoices, ReadsTheOlderNumberedForm) {
    const NcclLogFacts facts = parse_nccl_log(read_log("old-format.log"));
    EXPECT_EQ(facts.version, "2.18.5+cuda12.2");
    ASSERT_TRUE(facts.nvls_available.has_value());
    EXPECT_FALSE(*facts.nvls_available);
    ASSERT_EQ(facts.choices.size(), 2u);
    EXPECT_EQ(facts.choices[0].collective, "allgather");
    EXPECT_EQ(facts.choices[0].algorithm, "RING");
    EXPECT_EQ(facts.choices[0].protocol, "SIMPLE");
    EXPECT_FALSE(facts.choices[0].channels.has_value());
    EXPECT_EQ(facts.choices[1].collective, "");  // the oldest form does not name the call
    EXPECT_EQ(facts.choices[1].algorithm, "TREE");
    EXPECT_EQ(facts.choices[1].protocol, "LL");
    // An unnamed line stands for whichever collective the point ran.
    EXPECT_EQ(choice_for(facts.choices, "allreduce")->bytes, 1048576u);
}

TEST(NcclChoices, SharedMemoryInsideAHostIsAWarning) {
    const NcclLogFacts facts = parse_nccl_log(read_log("shm-intra.log"));
    EXPECT_EQ(facts.intra_host_transports.at("SHM/direct"), 2);
    EXPECT_TRUE(has_warning(nccl_fallback_warnings(facts, HostNetwork{}), "shm", "2 intra-host connection(s)"));
}

TEST(NcclChoices, MergesALogReadInPieces) {
    const std::string log = read_log("h100-ib.log");
    const std::size_t middle = log.find("gpu-a01:41122:41122 [0] NCCL INFO AllReduce: 8388608");
    NcclLogFacts facts = parse_nccl_log(log.substr(0, middle));
    merge_nccl_facts(facts, parse_nccl_log(log.substr(middle)));
    const NcclLogFacts whole = parse_nccl_log(log);
    EXPECT_EQ(facts.choices.size(), whole.choices.size());
    EXPECT_EQ(facts.cross_host_transports, whole.cross_host_transports);
    EXPECT_EQ(facts.network, whole.network);
}

TEST(NcclChoices, ReadsTheHostsRdmaDevicesAndTheirDrivers) {
    const std::filesystem::path root = std::filesystem::temp_directory_path() / "parbench-nccl-choices-test";
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root / "drivers" / "mlx5_core");
    std::filesystem::create_directories(root / "drivers" / "efa");
    for (const auto& [device, driver] : {std::pair{"mlx5_0", "mlx5_core"}, std::pair{"rdmap16s27", "efa"}}) {
        std::filesystem::create_directories(root / "class" / device / "device");
        std::filesystem::create_directory_symlink(root / "drivers" / driver, root / "class" / device / "device" / "driver");
    }
    const HostNetwork host = read_host_network((root / "class").string());
    EXPECT_EQ(host.rdma_devices, (std::vector<std::string>{"mlx5_0 (mlx5_core)", "rdmap16s27 (efa)"}));
    EXPECT_TRUE(host.has_efa);
    EXPECT_TRUE(read_host_network((root / "absent").string()).rdma_devices.empty());
    std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace parbench

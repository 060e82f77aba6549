// Expected values (plan/expected_collective.hpp) and verdicts (report/verdict.hpp): NCCL's tuning
// model on a preset cluster and the textbook algorithms on a host with given links, each checked
// against the figures written out by hand from the formulas the header states.
#include <gtest/gtest.h>

#include "plan/expected_collective.hpp"
#include "report/verdict.hpp"

namespace parbench {
namespace {

ClusterSpec h100() {
    ClusterSpec cluster;
    cluster.device = device_preset("H100");  // intra 360 GB/s, cross 40 GB/s; ring steps 3.4 / 9.6 us
    cluster.source = "preset H100";
    return cluster;
}

TEST(ExpectedOnCluster, LargeAllreduceInOneHostRunsRingSimpleAtTheLinksBusbw) {
    const double bytes = double(1u << 30);
    const Expectation e = expected_on_cluster("allreduce", bytes, {8, 1, 8}, h100());
    EXPECT_EQ(e.algorithm, "ring");
    EXPECT_EQ(e.protocol, "Simple");
    EXPECT_EQ(e.level, "intra-host");
    EXPECT_EQ(e.bound, "bandwidth");
    // Ring/Simple: base 8.4 us + 14 steps x 3.4 us; S x 2(n-1)/n at 360 GB/s.
    EXPECT_NEAR(e.latency_us, 8.4 + 14 * 3.4, 1e-9);
    EXPECT_NEAR(e.bandwidth_us, bytes * 14 / 8 / 360e3, 1e-6);
    EXPECT_NEAR(e.busbw_gbps, 360.0 * e.bandwidth_us / e.time_us, 1e-9);
    EXPECT_GT(e.busbw_gbps, 0.98 * 360.0);  // the 56 us of latency cost 1 % at 1 GiB
}

TEST(ExpectedOnCluster, SmallAllreduceTakesTheLowLatencyProtocol) {
    const Expectation e = expected_on_cluster("allreduce", 8, {8, 1, 8}, h100());
    EXPECT_EQ(e.algorithm, "ring");
    EXPECT_EQ(e.protocol, "LL");  // base 3.6 + 14 x 0.47 us, against Simple's 56 us
    EXPECT_NEAR(e.latency_us, 3.6 + 14 * 0.47, 1e-9);
    EXPECT_EQ(e.bound, "latency");
}

TEST(ExpectedOnCluster, AcrossHostsTheTreeWinsSmallAndTheRingLarge) {
    const GroupShape sixteen_hosts{128, 16, 8};
    const Expectation small = expected_on_cluster("allreduce", 8, sixteen_hosts, h100());
    EXPECT_EQ(small.algorithm, "tree");
    EXPECT_EQ(small.level, "cross-host");
    // Tree/LL: base 4.4 + 2 (7 NVLink hops x 0.52 x 1.8 + log2(16) network hops x 5.0).
    EXPECT_NEAR(small.latency_us, 4.4 + 2 * (7 * 0.52 * 1.8 + 4 * 5.0), 1e-9);
    const Expectation large = expected_on_cluster("allreduce", double(1u << 30), sixteen_hosts, h100());
    EXPECT_EQ(large.algorithm, "ring");
    EXPECT_EQ(large.protocol, "Simple");
    EXPECT_LT(large.busbw_gbps, 40.0);  // the network's 40 GB/s bounds it
    EXPECT_GT(large.busbw_gbps, 0.9 * 40.0);
}

TEST(ExpectedOnCluster, PointToPointCollectivesTakeOneHopAndTheLink) {
    const Expectation e = expected_on_cluster("alltoall", double(1u << 30), {8, 1, 8}, h100());
    EXPECT_EQ(e.algorithm, "p2p");
    EXPECT_NEAR(e.latency_us, 8.4 + 3.4, 1e-9);
    EXPECT_NEAR(e.bandwidth_us, double(1u << 30) * 7 / 8 / 360e3, 1e-6);
    // A skewed exchange's busiest rank moves more: its bandwidth term scales with it.
    const Expectation skewed = expected_on_cluster("alltoallv", double(1u << 30), {8, 1, 8}, h100(), 2.0);
    EXPECT_NEAR(skewed.bandwidth_us, 2.0 * e.bandwidth_us, 1e-6);
    EXPECT_DOUBLE_EQ(expected_on_cluster("allreduce", 8, {1, 1, 1}, h100()).time_us, 0.0);
}

HostLinks flat_host() {
    HostLinks links;
    links.step_latency_us = 1.0;
    links.call_latency_us = 2.0;
    links.ranks = 4;
    links.bandwidths = {{1u << 16, 40.0, 20.0, 10.0}, {1u << 24, 40.0, 20.0, 10.0}};
    return links;
}

TEST(ExpectedOnHost, TheBestAlgorithmAtEachSize) {
    const HostLinks links = flat_host();
    // 1 MiB on 2 ranks: ring 2 + 1 us and 512 KiB x (2 / 10 + 1 / 20 GB/s); recursive doubling
    // 2 us and 1 MiB x (1 / 10 + 1 / 20): the ring is faster.
    const double mib = 1 << 20;
    const Expectation ring = expected_on_host("allreduce", mib, 2, 2 * mib, links, true);
    EXPECT_EQ(ring.algorithm, "ring");
    EXPECT_NEAR(ring.time_us, 3.0 + mib / 2 * (2.0 / 10e3 + 1.0 / 20e3), 1e-9);
    // 8 bytes on 4 ranks: recursive doubling's 2 steps beat the ring's 6.
    const Expectation small = expected_on_host("allreduce", 8, 4, 16, links, true);
    EXPECT_EQ(small.algorithm, "recursive doubling");
    EXPECT_NEAR(small.latency_us, 2.0 + 1.0, 1e-9);
    // Batched timing has no barrier before each call: every step costs the back-to-back latency.
    EXPECT_NEAR(expected_on_host("allreduce", 8, 4, 16, links, false).latency_us, 2.0, 1e-9);
    // sendrecv moves its buffer in one step.
    const Expectation pair = expected_on_host("sendrecv", mib, 2, 2 * mib, links, true);
    EXPECT_NEAR(pair.time_us, 2.0 + mib / 10e3, 1e-9);
    EXPECT_NEAR(pair.busbw_gbps, mib / pair.time_us / 1e3, 1e-9);
}

TEST(ExpectedOnHost, BandwidthsInterpolateBetweenWorkingSets) {
    HostLinks links = flat_host();
    links.bandwidths = {{1u << 16, 40.0, 20.0, 10.0}, {1u << 24, 20.0, 10.0, 5.0}};
    EXPECT_DOUBLE_EQ(links.at(1u << 10).exchange_gbps, 10.0);
    EXPECT_DOUBLE_EQ(links.at(1u << 26).exchange_gbps, 5.0);
    EXPECT_NEAR(links.at(1u << 20).exchange_gbps, 7.5, 1e-12);  // halfway in log size
    EXPECT_NEAR(links.at(1u << 20).copy_gbps, 30.0, 1e-12);
}

TEST(Verdict, BandsAndCauses) {
    Expectation expected;
    expected.busbw_gbps = 10.0;
    expected.time_us = 100.0;
    expected.latency_us = 80.0;
    expected.bandwidth_us = 20.0;
    expected.bound = "latency";
    expected.algorithm = "ring";
    expected.level = "intra-host";
    EXPECT_EQ(judge_point(8.0, 125.0, {}, expected, {}).verdict, "ok");
    EXPECT_EQ(judge_point(5.0, 200.0, {}, expected, {}).verdict, "ok");  // 0.5 exactly is inside the band
    const PointVerdict low = judge_point(2.0, 500.0, {{"straggler", "rank 1 ..."}}, expected, {});
    EXPECT_EQ(low.verdict, "LOW");
    EXPECT_DOUBLE_EQ(low.ratio, 0.2);
    EXPECT_NE(low.cause.find("straggler"), std::string::npos) << low.cause;
    EXPECT_NE(low.cause.find("latency-bound"), std::string::npos) << low.cause;
    const PointVerdict above = judge_point(13.0, 77.0, {}, expected, {});
    EXPECT_EQ(above.verdict, "ABOVE");
    EXPECT_NE(above.cause.find("model is wrong"), std::string::npos);
    // Across hosts, a socket's figure against a fast link names the transport.
    expected.level = "cross-host";
    expected.busbw_gbps = 40.0;
    expected.bound = "bandwidth";
    EXPECT_NE(judge_point(3.0, 1000.0, {}, expected, {}).cause.find("TCP sockets"), std::string::npos);
    const nlohmann::json json = to_json(low);
    EXPECT_EQ(json["verdict"], "LOW");
    EXPECT_DOUBLE_EQ(json["ratio"].get<double>(), 0.2);
    EXPECT_EQ(json["expected"]["algorithm"], "ring");
}

}  // namespace
}  // namespace parbench

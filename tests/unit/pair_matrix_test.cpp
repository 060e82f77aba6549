// parbench pairs' judgement on literal matrices: which pairs and latencies are flagged, and
// what the diagnosis blames: a CPU-bound rank, a host's shared memory, or a host's link.
#include "report/pair_matrix.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace parbench {
namespace {

using Matrix = std::vector<std::vector<double>>;

// n participants, every entry `value` (NaN on the diagonal).
Matrix filled(std::size_t n, double value) {
    Matrix m(n, std::vector<double>(n, value));
    for (std::size_t i = 0; i < n; ++i) m[i][i] = std::nan("");
    return m;
}

// Both directions of pair (a, b) set.
void set_pair(Matrix& m, std::size_t a, std::size_t b, double value) { m[a][b] = m[b][a] = value; }

std::vector<PairParticipant> on_hosts(const std::vector<std::string>& hosts) {
    std::vector<PairParticipant> participants;
    for (std::size_t r = 0; r < hosts.size(); ++r) participants.push_back({static_cast<int>(r), hosts[r]});
    return participants;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    return text;
}

TEST(PairDiagnosis, AStarvedRankIsCpuBoundNotALink) {
    // Five ranks on one host; rank 4's exchanges are slow and it ran on a CPU 10% of their
    // time while its partners polled at 90%: the CPU, not a cable.
    const auto participants = on_hosts({"a", "a", "a", "a", "a"});
    Matrix bandwidth = filled(5, 10.0), latency = filled(5, 0.5), cpu = filled(5, 0.9);
    for (std::size_t r = 0; r < 4; ++r) {
        set_pair(bandwidth, r, 4, 1.0);
        cpu[4][r] = 0.1;
    }
    const PairAnalysis analysis = flag_slow_pairs(bandwidth, latency, participants, 0.8);
    EXPECT_EQ(analysis.flagged.size(), 8u);
    const std::string diagnosis = joined(diagnose_pairs(analysis, participants, cpu));
    EXPECT_NE(diagnosis.find("rank 4 (a) is CPU-bound, not slowed by a link"), std::string::npos) << diagnosis;
    EXPECT_NE(diagnosis.find("10%"), std::string::npos) << diagnosis;
    EXPECT_NE(diagnosis.find("90%"), std::string::npos) << diagnosis;
    EXPECT_EQ(diagnosis.find("check that host's link"), std::string::npos) << diagnosis;
}

TEST(PairDiagnosis, SlowPairsInsideAHostWithFullCpuBlameNoCable) {
    // Two hosts; the slow pairs are inside host b, both sides ran on a CPU all along.
    const auto participants = on_hosts({"a", "a", "b", "b", "b"});
    Matrix bandwidth = filled(5, 10.0), latency = filled(5, 0.5), cpu = filled(5, 1.0);
    for (std::size_t i = 0; i < 5; ++i)
        for (std::size_t j = 0; j < 5; ++j)
            if (i != j && participants[i].host != participants[j].host) bandwidth[i][j] = 1.0;  // the network
    set_pair(bandwidth, 2, 3, 2.0);
    set_pair(bandwidth, 2, 4, 2.0);
    const PairAnalysis analysis = flag_slow_pairs(bandwidth, latency, participants, 0.8);
    ASSERT_EQ(analysis.flagged.size(), 4u);
    const std::string diagnosis = joined(diagnose_pairs(analysis, participants, cpu));
    EXPECT_NE(diagnosis.find("all inside a host"), std::string::npos) << diagnosis;
    EXPECT_EQ(diagnosis.find("check that host's link"), std::string::npos) << diagnosis;
    EXPECT_EQ(diagnosis.find("CPU-bound"), std::string::npos) << diagnosis;
}

TEST(PairDiagnosis, OneHostsSlowLinkIsNamedWithTheLinkToCheck) {
    // Four hosts of one rank; host d's pairs are slow and both sides waited alike (40% each).
    const auto participants = on_hosts({"a", "b", "c", "d"});
    Matrix bandwidth = filled(4, 1.0), latency = filled(4, 20.0), cpu = filled(4, 0.4);
    for (std::size_t r = 0; r < 3; ++r) set_pair(bandwidth, r, 3, 0.1);
    const PairAnalysis analysis = flag_slow_pairs(bandwidth, latency, participants, 0.8);
    EXPECT_EQ(analysis.flagged.size(), 6u);
    const std::string diagnosis = joined(diagnose_pairs(analysis, participants, cpu));
    EXPECT_NE(diagnosis.find("every slow pair involves d: check that host's link (cable"), std::string::npos)
        << diagnosis;
    EXPECT_EQ(diagnosis.find("CPU-bound"), std::string::npos) << diagnosis;
}

TEST(PairDiagnosis, LatencyFarAboveItsKindIsFlaggedAndItsAsymmetrySaid) {
    // 8 ms against 0.2 ms: rank 0 waited for rank 2, which timed the same exchange at 0.2 ms.
    const auto participants = on_hosts({"a", "a", "a", "a", "a"});
    Matrix bandwidth = filled(5, 10.0), latency = filled(5, 200.0), cpu = filled(5, 0.9);
    latency[0][2] = 8000.0;
    const PairAnalysis analysis = flag_slow_pairs(bandwidth, latency, participants, 0.8);
    ASSERT_EQ(analysis.slow_latency.size(), 1u);
    const SlowLatency& slow = analysis.slow_latency.front();
    EXPECT_EQ(slow.from, 0);
    EXPECT_EQ(slow.to, 2);
    EXPECT_DOUBLE_EQ(slow.median_us, 200.0);
    EXPECT_TRUE(slow.asymmetric());
    EXPECT_TRUE(analysis.flagged.empty());
    // Jitter of a few times a sub-microsecond median is not flagged: 3x is below the factor.
    latency[0][2] = 600.0;
    EXPECT_TRUE(flag_slow_pairs(bandwidth, latency, participants, 0.8).slow_latency.empty());
}

TEST(PairDiagnosis, NothingFlaggedNothingSaid) {
    const auto participants = on_hosts({"a", "a", "a"});
    const Matrix bandwidth = filled(3, 10.0), latency = filled(3, 1.0), cpu = filled(3, 0.9);
    const PairAnalysis analysis = flag_slow_pairs(bandwidth, latency, participants, 0.8);
    EXPECT_TRUE(diagnose_pairs(analysis, participants, cpu).empty());
}

}  // namespace
}  // namespace parbench

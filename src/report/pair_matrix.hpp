// The all-pairs link matrix (parbench pairs): which pairs are slow, and why. A pair is flagged
// when its bandwidth is below a fraction of the median of the pairs of its kind: pairs inside
// one host (shared memory, NVLink) and pairs across hosts (the network) are judged separately,
// since a healthy network pair is always far slower than a healthy pair inside a host. Its
// latency is flagged at 4x the median of its kind, and called asymmetric when the peer times
// the same exchange at a quarter or less (one side arrived late: it was held off the CPU). The
// diagnosis tells a CPU-bound rank (its CPU share in its exchanges well below the others')
// from a slow link, and a host's shared memory from its network. Medians need most pairs
// healthy: with 4 ranks, one bad rank is in half the pairs.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace parbench {

struct PairParticipant {
    int rank = 0;
    std::string host;
};

struct SlowPair {
    int from = 0;  // participant indices
    int to = 0;
    double bandwidth_gbps = 0.0;
    double median_gbps = 0.0;  // of its kind
    bool across_hosts = false;
};

// A pair's latency far above its kind's median; asymmetric when far above the peer's timing of
// the same exchange too.
struct SlowLatency {
    int from = 0;  // participant indices: `from`'s median with `to`
    int to = 0;
    double latency_us = 0.0;
    double reverse_us = 0.0;  // `to`'s median of the same exchange
    double median_us = 0.0;   // of its kind
    bool across_hosts = false;
    bool asymmetric() const;
};

// The factor a latency must exceed its kind's median or its reverse by to be flagged: latencies
// of microseconds jitter by tens of percent, a starved or late rank adds milliseconds.
inline constexpr double latency_flag_factor = 4.0;

struct PairAnalysis {
    std::optional<double> median_within_host_gbps;
    std::optional<double> median_across_hosts_gbps;
    std::vector<SlowPair> flagged;  // in row order
    std::optional<double> median_latency_within_host_us;
    std::optional<double> median_latency_across_hosts_us;
    std::vector<SlowLatency> slow_latency;  // in row order
};

// bandwidth[i][j], latency[i][j]: participant i's measurement with j (the diagonal is ignored;
// NaN: not measured yet).
PairAnalysis flag_slow_pairs(const std::vector<std::vector<double>>& bandwidth,
                             const std::vector<std::vector<double>>& latency,
                             const std::vector<PairParticipant>& participants, double flag_below);

// What the flagged pairs point to, one line each (empty when nothing is flagged): a rank in
// half the slow pairs or more whose CPU share (cpu_share[i][j]: i's CPU time / wall time in its exchanges
// with j) is below 0.6 of its partners' in the same exchanges is CPU-bound; slow pairs all
// inside one host involve no cable or NIC; else the suspect hosts' links.
std::vector<std::string> diagnose_pairs(const PairAnalysis& analysis, const std::vector<PairParticipant>& participants,
                                        const std::vector<std::vector<double>>& cpu_share);

// The likely culprits: the hosts in every flagged pair when there are such (and they are not
// all the hosts); else the hosts in at least half of the flagged pairs, when together they
// are in every flagged pair and are not all the hosts; empty otherwise.
std::vector<std::string> hosts_common_to_flagged(const PairAnalysis& analysis,
                                                 const std::vector<PairParticipant>& participants);

// One "pairs" entry of a report's results.
nlohmann::json pairs_result_json(const std::string& by, std::uint64_t bandwidth_bytes, std::uint64_t latency_bytes,
                                 int rounds, const std::vector<PairParticipant>& participants,
                                 const std::vector<std::vector<double>>& bandwidth_gbps,
                                 const std::vector<std::vector<double>>& latency_us,
                                 const std::vector<std::vector<double>>& cpu_share, double flag_below,
                                 const PairAnalysis& analysis);

// The matrix, rows = from, columns = to; `-` on the diagonal.
void print_pair_matrix(std::ostream& out, const std::string& title, const std::vector<std::vector<double>>& matrix,
                       const std::vector<PairParticipant>& participants, int precision);
// The medians, the flagged pairs and latencies, and the diagnosis.
void print_flagged_pairs(std::ostream& out, const PairAnalysis& analysis,
                         const std::vector<PairParticipant>& participants, double flag_below,
                         const std::vector<std::vector<double>>& cpu_share);

}  // namespace parbench

// The all-pairs link matrix (parbench pairs): which pairs are slow. A pair is flagged when
// its bandwidth is below a fraction of the median of the pairs of its kind: pairs inside one
// host (shared memory, NVLink) and pairs across hosts (the network) are judged separately,
// since a healthy network pair is always far slower than a healthy pair inside a host.
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

struct PairAnalysis {
    std::optional<double> median_within_host_gbps;
    std::optional<double> median_across_hosts_gbps;
    std::vector<SlowPair> flagged;  // in row order
};

// bandwidth[i][j]: participant i's measurement with j (the diagonal is ignored).
PairAnalysis flag_slow_pairs(const std::vector<std::vector<double>>& bandwidth,
                             const std::vector<PairParticipant>& participants, double flag_below);

// The likely culprits: the hosts in every flagged pair when there are such (and they are not
// all the hosts); else the hosts in at least half of the flagged pairs, when together they
// are in every flagged pair and are not all the hosts; empty otherwise.
std::vector<std::string> hosts_common_to_flagged(const PairAnalysis& analysis,
                                                 const std::vector<PairParticipant>& participants);

// One "pairs" entry of a report's results.
nlohmann::json pairs_result_json(const std::string& by, std::uint64_t bandwidth_bytes, std::uint64_t latency_bytes,
                                 int rounds, const std::vector<PairParticipant>& participants,
                                 const std::vector<std::vector<double>>& bandwidth_gbps,
                                 const std::vector<std::vector<double>>& latency_us, double flag_below,
                                 const PairAnalysis& analysis);

// The matrix, rows = from, columns = to; `-` on the diagonal.
void print_pair_matrix(std::ostream& out, const std::string& title, const std::vector<std::vector<double>>& matrix,
                       const std::vector<PairParticipant>& participants, int precision);
void print_flagged_pairs(std::ostream& out, const PairAnalysis& analysis,
                         const std::vector<PairParticipant>& participants, double flag_below);

}  // namespace parbench

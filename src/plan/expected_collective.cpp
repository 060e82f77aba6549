#include "plan/expected_collective.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "plan/alpha_beta.hpp"

namespace parbench {
namespace {

// One way of running the call: its latency and its bandwidth term for this size.
struct Candidate {
    std::string algorithm;
    std::string protocol;
    double latency_us = 0.0;
    double bandwidth_us = 0.0;
    double time_us() const { return latency_us + bandwidth_us; }
};

Candidate fastest(const std::vector<Candidate>& candidates) {
    return *std::min_element(candidates.begin(), candidates.end(),
                             [](const Candidate& a, const Candidate& b) { return a.time_us() < b.time_us(); });
}

int floor_log2(int n) {
    int steps = 0;
    while ((1 << (steps + 1)) <= n) ++steps;
    return steps;
}

int ceil_log2(int n) {
    int steps = 0;
    while ((1 << steps) < n) ++steps;
    return steps;
}

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

Expectation finish(const Candidate& best, const std::string& collective, double bytes, int ranks,
                   const std::string& level, const std::string& source) {
    Expectation e;
    e.time_us = best.time_us();
    e.latency_us = best.latency_us;
    e.bandwidth_us = best.bandwidth_us;
    e.algorithm = best.algorithm;
    e.protocol = best.protocol;
    e.level = level;
    e.bound = best.latency_us >= best.bandwidth_us ? "latency" : "bandwidth";
    e.source = source;
    // bytes per microsecond is MB/s; / 1e3 is decimal GB/s, as the measured busbw.
    e.busbw_gbps = e.time_us > 0.0 ? bytes * bus_factor(collective, ranks) / e.time_us / 1e3 : 0.0;
    return e;
}

// NCCL's tuning tables, src/graph/tuning.cc at commit 01afd20, in microseconds. Index [algorithm]
// [protocol]: algorithm 0 Tree, 1 Ring; protocol 0 LL, 1 LL128, 2 Simple. Levels: NVLink, network.
enum Protocol { ll = 0, ll128 = 1, simple = 2 };
enum Algorithm { tree = 0, ring = 1 };
constexpr const char* protocol_names[3] = {"LL", "LL128", "Simple"};
constexpr double base_latency_us[2][3] = {{4.4, 4.4, 0.0}, {3.6, 10.0, 8.4}};
constexpr double nvlink_hop_us[2][3] = {{0.52, 1.2, 28.0}, {0.47, 1.9, 3.4}};
constexpr double network_hop_us[2][3] = {{5.0, 8.5, 50.0}, {2.7, 4.0, 9.6}};

}  // namespace

HostBandwidth HostLinks::at(std::uint64_t working_set_bytes) const {
    if (bandwidths.empty()) return {};
    if (working_set_bytes <= bandwidths.front().working_set_bytes) return bandwidths.front();
    if (working_set_bytes >= bandwidths.back().working_set_bytes) return bandwidths.back();
    const auto above = std::find_if(bandwidths.begin(), bandwidths.end(), [&](const HostBandwidth& b) {
        return b.working_set_bytes >= working_set_bytes;
    });
    const HostBandwidth& high = *above;
    const HostBandwidth& low = *std::prev(above);
    const double t = std::log(static_cast<double>(working_set_bytes) / static_cast<double>(low.working_set_bytes)) /
                     std::log(static_cast<double>(high.working_set_bytes) / static_cast<double>(low.working_set_bytes));
    const auto between = [t](double a, double b) { return a + t * (b - a); };
    return {working_set_bytes, between(low.copy_gbps, high.copy_gbps), between(low.reduce_gbps, high.reduce_gbps),
            between(low.exchange_gbps, high.exchange_gbps)};
}

nlohmann::json to_json(const HostLinks& links) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const HostBandwidth& b : links.bandwidths)
        sizes.push_back({{"working_set_bytes", b.working_set_bytes},
                         {"copy_gbps", b.copy_gbps},
                         {"reduce_gbps", b.reduce_gbps},
                         {"exchange_gbps", b.exchange_gbps}});
    return {{"step_latency_us", links.step_latency_us},
            {"call_latency_us", links.call_latency_us},
            {"bandwidths", sizes},
            {"ranks", links.ranks},
            {"cpu", links.cpu}};
}

nlohmann::json to_json(const Expectation& e) {
    return {{"time_us", e.time_us},       {"latency_us", e.latency_us}, {"bandwidth_us", e.bandwidth_us},
            {"busbw_gbps", e.busbw_gbps}, {"algorithm", e.algorithm},   {"protocol", e.protocol},
            {"level", e.level},           {"bound", e.bound},           {"source", e.source}};
}

Expectation expected_on_cluster(const std::string& collective, double bytes, const GroupShape& group,
                                const ClusterSpec& cluster, double traffic_scale) {
    const int n = group.ranks;
    const int hosts = std::max(1, group.hosts);
    const std::string level = hosts > 1 ? "cross-host" : "intra-host";
    const LinkModel& intra = cluster.device.intra_host;
    const LinkModel& cross = cluster.device.cross_host;
    const std::string source = cluster.source + " (" + cluster.device.source + ") " + level +
                               " busbw with NCCL's tuning model (tuning.cc 01afd20)";
    if (n <= 1) return finish({"none", "", 0.0, 0.0}, collective, bytes, n, level, source);
    const double busbw = hosts > 1 ? std::min(intra.busbw_gbps, cross.busbw_gbps) : intra.busbw_gbps;
    const double factor = bus_factor(collective, n);
    // The cluster's Ring/Simple hop where it states one (plan's own figure), else NCCL's.
    const auto hop = [&](bool network, Algorithm a, int p) {
        const LinkModel& link = network ? cross : intra;
        if (a == ring && p == simple && link.ring_step_us > 0.0) return link.ring_step_us;
        return network ? network_hop_us[a][p] : nvlink_hop_us[a][p];
    };
    const double ppn = static_cast<double>(n) / hosts;
    std::vector<Candidate> candidates;
    const bool tuned = collective == "allreduce" || collective == "allgather" || collective == "reducescatter" ||
                       collective == "broadcast" || collective == "reduce";
    if (!tuned) {  // grouped send/recv: one Simple hop, the link's bandwidth
        candidates.push_back({"p2p", "Simple", base_latency_us[ring][simple] + hop(hosts > 1, ring, simple),
                              bytes * factor * traffic_scale / (busbw * 1e3)});
        return finish(fastest(candidates), collective, bytes, n, level, source);
    }
    const bool rooted = collective == "broadcast" || collective == "reduce";
    const int steps = collective == "allreduce" ? 2 * (n - 1) : rooted ? n : n - 1;
    const int network_steps = hosts == 1 ? 0 : collective == "allreduce" ? 2 * (hosts - 1) : rooted ? hosts : hosts - 1;
    for (int p : {ll, ll128, simple}) {
        double ring_busbw = busbw;
        if (p == ll) ring_busbw *= (hosts > 1 || collective == "allreduce" || collective == "reduce") ? 0.25 : 1.0 / 3.0;
        if (p == ll128) ring_busbw *= ppn < 2.0 ? 0.7 : 0.92;
        const double intra_hop = hop(false, ring, p) * (hosts > 1 && p == ll ? 1.8 : 1.0);
        double latency = base_latency_us[ring][p];
        if (rooted)
            latency += hop(hosts > 1, ring, p);  // a pipelined chain: NCCL counts one hop
        else
            latency += (steps - network_steps) * intra_hop + network_steps * hop(true, ring, p);
        candidates.push_back({"ring", protocol_names[p], latency, bytes * factor / (ring_busbw * 1e3)});
        if (collective != "allreduce") continue;
        double tree_busbw = busbw * 0.9;
        if (p == ll) tree_busbw /= 3.8;
        if (p == ll128) tree_busbw *= hosts == 1 ? 7.0 / 9.0 : 0.915;
        const double tree_intra_hop = hop(false, tree, p) * (hosts > 1 && p == ll ? 1.8 : 1.0);
        const double tree_latency =
            base_latency_us[tree][p] +
            2.0 * ((ppn - 1.0) * tree_intra_hop + floor_log2(hosts) * hop(true, tree, p));
        // A tree moves the whole buffer up and down: algorithm bandwidth is half its bus bandwidth.
        candidates.push_back({"tree", protocol_names[p], tree_latency, bytes / (tree_busbw * 0.5 * 1e3)});
    }
    return finish(fastest(candidates), collective, bytes, n, level, source);
}

Expectation expected_on_host(const std::string& collective, double bytes, int n, double working_set_bytes,
                             const HostLinks& links, bool per_iteration, double traffic_scale) {
    const HostBandwidth bandwidth = links.at(static_cast<std::uint64_t>(std::max(1.0, working_set_bytes)));
    std::ostringstream source;
    source << std::setprecision(3) << "this host, measured with " << links.ranks << " ranks at once: step "
           << links.step_latency_us << " us (first " << (per_iteration ? links.call_latency_us : links.step_latency_us)
           << " us), exchange " << bandwidth.exchange_gbps << " GB/s and reduce " << bandwidth.reduce_gbps
           << " GB/s per rank at a " << static_cast<double>(bandwidth.working_set_bytes) / (1 << 20) << " MiB working set";
    if (n <= 1) return finish({"none", "", 0.0, 0.0}, collective, bytes, n, "intra-host", source.str());
    // k steps: the first as the harness times a call, the rest back to back.
    const double first = per_iteration ? std::max(links.call_latency_us, links.step_latency_us) : links.step_latency_us;
    const auto steps = [&](double k) { return k <= 0 ? 0.0 : first + (k - 1) * links.step_latency_us; };
    const double copy = 1.0 / (bandwidth.exchange_gbps * 1e3);  // us per byte moved
    const double reduce = 1.0 / (bandwidth.reduce_gbps * 1e3);  // us per byte reduced
    const double s = bytes;
    const double share = s * (n - 1) / n;  // what each rank sends of a ring, or the root of a tree
    const int log_n = ceil_log2(n);
    const int doubling = floor_log2(n) + (power_of_two(n) ? 0 : 2);  // the extra two fold the ranks past 2^k
    std::vector<Candidate> c;
    if (collective == "allreduce") {
        c.push_back({"ring", "", steps(2.0 * (n - 1)), share * (2 * copy + reduce)});
        c.push_back({"recursive doubling", "", steps(doubling), doubling * s * (copy + reduce)});
        c.push_back({"Rabenseifner", "", steps(2 * floor_log2(n) + (power_of_two(n) ? 0 : 2)),
                     share * (2 * copy + reduce) + (power_of_two(n) ? 0.0 : s * (copy + reduce))});
    } else if (collective == "allgather") {
        c.push_back({"ring", "", steps(n - 1), share * copy});
        c.push_back({power_of_two(n) ? "recursive doubling" : "Bruck", "", steps(log_n), share * copy});
    } else if (collective == "reducescatter") {
        c.push_back({"ring", "", steps(n - 1), share * (copy + reduce)});
        if (power_of_two(n)) c.push_back({"recursive halving", "", steps(log_n), share * (copy + reduce)});
    } else if (collective == "broadcast") {
        c.push_back({"binomial tree", "", steps(log_n), log_n * s * copy});
        c.push_back({"scatter + ring allgather", "", steps(log_n + n - 1), 2.0 * share * copy});
    } else if (collective == "reduce") {
        c.push_back({"binomial tree", "", steps(log_n), log_n * s * (copy + reduce)});
        c.push_back({"reduce-scatter + gather", "", steps(2.0 * log_n), share * (2 * copy + reduce)});
    } else if (collective == "alltoall" || collective == "alltoallv") {
        c.push_back({"pairwise", "", steps(n - 1), share * copy * traffic_scale});
        if (collective == "alltoall") c.push_back({"Bruck", "", steps(log_n), log_n * (s / 2.0) * copy});
    } else if (collective == "gather" || collective == "scatter") {
        c.push_back({"binomial tree", "", steps(log_n), share * copy});
        c.push_back({"linear", "", steps(n - 1), share * copy});
    } else {  // sendrecv: every rank sends and receives its buffer in one step
        c.push_back({"pairwise", "", steps(1), s * copy});
    }
    return finish(fastest(c), collective, bytes, n, "intra-host", source.str());
}

}  // namespace parbench

// Communication time as latency plus bytes over bandwidth (the alpha-beta, or Hockney, model),
// per collective and per placement of its group (inside one host, or across hosts). The
// bandwidth term uses nccl-tests' bus bandwidth, t = alpha + S·factor(n)/busbw with S in
// nccl-tests' size convention and factor(n) its bus factor (2(n-1)/n for all-reduce,
// (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for point-to-point), so a fit at
// one group size carries to another the way a ring algorithm's time does.
//
// Calibration (--calibrate): from parbench collective reports (size sweeps), alpha and
// 1/busbw are fitted per collective and placement by least squares on relative error
// (every size weighs alike, from 8 B to 1 GiB). Inside the swept range a call's time is the
// measured medians' own, interpolated linearly between the two sizes around it: the line, which
// every size weighs alike, misses where the time is not a line (Open MPI on 2 shared-memory
// ranks: a reduce-scatter of 8 MiB measured 4.7 ms against the line's 1.6 ms, its temporaries
// faulted in afresh on every call, 2026-12-02), and the sizes a gradient bucket has are there.
// Beyond the swept sizes the line answers. A group of another size is looked up at its own bus
// factor's bytes, as the line carries it (a ring's time at the same bytes per link).
//
// Averaged reductions (op avg) are fitted apart, as "<collective> avg", from sweeps run with
// --op avg: MPI has no average, so parbench's MPI backend sums and then divides on the host (a
// pass over the result that the sum's sweep does not hold: 4 ms on gpt-small's 14.9 MB of
// gradients here); NCCL averages inside its reduction (ncclAvg, NCCL 2.10 release notes), so
// without an avg sweep the sum's fit or the preset link serves both.
//
// Non-blocking calls (a sweep run with --nonblocking, the MPI_I* call and its wait) are fitted
// apart too, as "<collective> nonblocking" (after " avg" for an averaged one): Open MPI runs them
// on libnbc's schedules, not the tuned blocking algorithms (a 14.9 MB averaged all-reduce off
// cache 9.8-10.3 ms against 7.1, results/2026-12-05-off-cache). Without such a sweep the blocking
// call's figure serves (host_overlap.hpp says where plan asks for them).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "plan/cluster.hpp"

namespace parbench {

enum class Placement { intra_host, cross_host };
std::string placement_name(Placement placement);

struct CollectiveFit {
    std::string collective;
    Placement placement = Placement::intra_host;
    double alpha_us = 0.0;
    double busbw_gbps = 0.0;
    int ranks = 0;              // of the measured group
    int sizes = 0;              // points fitted
    // The measured medians by size, as (bytes x bus factor at `ranks`, us), ascending: what
    // time_us interpolates inside the swept range.
    std::vector<std::pair<double, double>> measured;
    double median_abs_error = 0.0;  // relative, over the fitted points
    std::string source;         // the report(s), or "preset ..."
    std::string warning;        // "" or why the fit is less certain than its figures look
};

// What a calibration sweep must show to be fitted: its fitted time grows at least 1.5x from the
// smallest size to the largest (else no bandwidth is in it). A line that misses the measured
// medians by more than 20 % is warned about, not refused: shared-memory MPI on a loaded 2-core VM
// misses by 30-40 % (protocol switches between sizes) and is still the best figure there is.
inline constexpr double min_size_dependence = 1.5;
inline constexpr double warn_fit_error = 0.2;
inline constexpr std::int64_t max_calibration_bytes = std::int64_t{1} << 50;
inline constexpr double max_calibration_time_us = 1e12;

// A JSON document and the path it was read from (named in messages).
struct NamedDocument {
    std::string path;
    nlohmann::json json;
};

// Bus factor of nccl-tests (doc/PERFORMANCE.md) for a group of n ("<collective> avg" as its
// collective's).
double bus_factor(const std::string& collective, int n);

// The name a collective's averaged form (op avg) is fitted and asked for under.
std::string averaged_collective(const std::string& collective);
// The name a collective's non-blocking form is fitted and asked for under (of the averaged
// name for an averaged one).
std::string nonblocking_collective(const std::string& collective);

class CommModel {
  public:
    // The cluster's preset links for every collective; calibrated fits override them.
    explicit CommModel(const ClusterSpec& cluster);
    void add_fit(const CollectiveFit& fit);
    // Microseconds for one call moving `bytes` (nccl-tests' size) on a group of `ranks`; 0 for
    // a group of one. "<collective> avg" takes its own fit when calibrated, else the collective's;
    // "<...> nonblocking" its own, else the blocking name's. A cross-host all-gather or reduce-scatter on the cluster's links (not a
    // calibrated fit, whose alpha holds its own group's steps) with `members_per_host` > 0 adds
    // its ring's per-step latencies: (hosts - 1) network steps and (ranks - hosts) NVLink steps.
    double time_us(const std::string& collective, double bytes, int ranks, Placement placement,
                   int members_per_host = 0) const;
    // Where the figure for this collective and placement comes from.
    std::string source(const std::string& collective, Placement placement) const;
    const std::vector<CollectiveFit>& fits() const { return fits_; }

  private:
    const CollectiveFit* find(const std::string& collective, Placement placement) const;
    ClusterSpec cluster_;
    std::vector<CollectiveFit> fits_;
};

// Fits from collective reports (parbench.report/v1, command a collective or `all`). Reads each
// point's median time; tolerates per-rank data, and out-of-place / in-place halves either as
// rows with "placement": "out"|"in" or nested in one row (the out-of-place half is taken). UsageError naming --calibrate for another schema, a
// non-collective report, or a collective with fewer than 3 sizes.
// Every key read is checked (type, finite, range) and a refusal names the file and key; a sweep
// that does not hold a bandwidth, or is not a line, is refused naming the collective.
std::vector<CollectiveFit> fit_collective_reports(const std::vector<std::string>& paths);
std::vector<CollectiveFit> fit_collective_documents(const std::vector<NamedDocument>& documents);

nlohmann::json to_json(const CollectiveFit& fit);

}  // namespace parbench

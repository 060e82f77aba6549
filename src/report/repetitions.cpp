#include "report/repetitions.hpp"

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>
#include <tuple>

#include "bench/statistics.hpp"

namespace parbench {
namespace {

// -r all measures a rooted collective once per root: each root is a point of its own.
using PointKey = std::tuple<std::string, std::uint64_t, DType, int, int, bool, std::string>;

// alltoallv's "zipf:1.2 seed 1" ("... combine"), as compare names the point; "" without a skew.
std::string skew_text(const CollectiveResult& r) {
    if (!r.skew) return "";
    return r.skew->distribution + " seed " + std::to_string(r.skew->seed) +
           (r.skew->direction == "combine" ? " combine" : "");
}

PointKey key_of(const CollectiveResult& r) {
    return {r.collective, r.bytes, r.dtype, r.op ? static_cast<int>(*r.op) : -1, r.root.value_or(-1), r.inplace,
            skew_text(r)};
}

}  // namespace

std::vector<PointSpread> repetition_spreads(const std::vector<CollectiveResult>& results) {
    std::map<PointKey, std::size_t> index;
    std::vector<PointSpread> points;
    for (const CollectiveResult& r : results) {
        if (r.skipped) continue;
        const auto [found, fresh] = index.try_emplace(key_of(r), points.size());
        if (fresh) points.push_back({&r, {}, {}, 0.0});
        PointSpread& point = points[found->second];
        point.time_us.push_back(r.reported_time_us);
        point.busbw_gbps.push_back(r.busbw_gbps);
    }
    std::erase_if(points, [](const PointSpread& p) { return p.time_us.size() < 2; });
    for (PointSpread& point : points) {
        const auto [low, high] = std::minmax_element(point.time_us.begin(), point.time_us.end());
        const double middle = summarize(point.time_us).median;
        point.spread = middle > 0.0 ? (*high - *low) / middle : 0.0;
    }
    return points;
}

nlohmann::json repetitions_json(const std::vector<CollectiveResult>& results, int requested,
                                std::size_t points_per_sweep) {
    nlohmann::json points = nlohmann::json::array();
    for (const PointSpread& p : repetition_spreads(results)) {
        nlohmann::json entry = {{"collective", p.first->collective},
                                {"bytes", p.first->bytes},
                                {"dtype", dtype_name(p.first->dtype)},
                                {"op", p.first->op ? nlohmann::json(reduce_op_name(*p.first->op)) : nlohmann::json()},
                                {"inplace", p.first->inplace},
                                {"time_us", p.time_us},
                                {"busbw_gbps", p.busbw_gbps},
                                {"spread", p.spread}};
        if (p.first->root) entry["root"] = *p.first->root;
        if (p.first->skew) entry["skew"] = skew_text(*p.first);
        points.push_back(std::move(entry));
    }
    const std::size_t completed = points_per_sweep > 0 ? results.size() / points_per_sweep : 0;
    return {{"requested", requested}, {"completed", completed}, {"points", points}};
}

std::optional<std::string> spread_line(const std::vector<PointSpread>& spreads, std::size_t sweeps) {
    if (spreads.empty()) return std::nullopt;
    std::vector<double> values;
    for (const PointSpread& p : spreads) values.push_back(p.spread);
    const auto largest = std::max_element(spreads.begin(), spreads.end(),
                                          [](const PointSpread& a, const PointSpread& b) { return a.spread < b.spread; });
    std::ostringstream line;
    line << std::fixed << std::setprecision(1) << "# run-to-run spread over " << sweeps
         << " sweeps ((largest - smallest) / median of a point's times): median " << summarize(values).median * 100.0
         << " %, largest " << largest->spread * 100.0 << " % (" << largest->first->collective << ' '
         << largest->first->bytes << " B " << (largest->first->inplace ? "in-place" : "out-of-place") << ")";
    return line.str();
}

}  // namespace parbench

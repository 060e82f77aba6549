// Is this number normal? A measured point set against its expected value
// (plan/expected_collective.hpp): the ratio of the measured busbw to the expected one, and a
// verdict: "ok" inside the band, "LOW" below it with the likely cause the figures point to, or
// "ABOVE" when the point is faster than the model allows, which says the model is wrong there.
//
// The band: the expected value is what a well-chosen algorithm reaches on the links as
// measured or described, so a point at half of it has lost something a user should look for
// (nccl-tests users gate at a fixed fraction of the link by hand, NCCL_TESTS_MIN_BW); a point a
// quarter above it beats the links' own figures, beyond what run-to-run noise does to a median.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/statistics.hpp"
#include "plan/expected_collective.hpp"

namespace parbench {

inline constexpr double verdict_low_ratio = 0.5;
inline constexpr double verdict_above_ratio = 1.25;

// What else the run knows that can explain a low figure.
struct VerdictContext {
    bool oversubscribed = false;  // more ranks than cores on a host
    std::string transport_note;   // e.g. "NCCL ran across hosts over TCP sockets" (report/nccl_choices.hpp)
};

struct PointVerdict {
    Expectation expected;
    double ratio = 0.0;   // measured busbw / expected busbw
    std::string verdict;  // "ok", "LOW", "ABOVE"
    std::string cause;    // why, for LOW and ABOVE
};

// `warnings`: the point's own (their kinds name what was seen: straggler, preempted, page-faults,
// wide-spread, ...).
PointVerdict judge_point(double busbw_gbps, double time_us, const std::vector<Warning>& warnings,
                         const Expectation& expected, const VerdictContext& context);
// The point's "expected", "ratio", "verdict" and "verdict_cause" keys.
nlohmann::json to_json(const PointVerdict& verdict);

}  // namespace parbench

#include "report/verdict.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace parbench {
namespace {

bool has_kind(const std::vector<Warning>& warnings, const std::string& kind) {
    return std::any_of(warnings.begin(), warnings.end(), [&](const Warning& w) { return w.kind == kind; });
}

std::string figure(double value) {
    std::ostringstream text;
    text << std::setprecision(3) << value;
    return text.str();
}

// A TCP socket between hosts carries a few GB/s (the 3 GB/s of issue 35's public report, where
// InfiniBand reached 489): a cross-host busbw this low against a faster link points at sockets.
constexpr double socket_like_gbps = 4.0;

// The causes the figures point to, most specific first.
std::vector<std::string> low_causes(double busbw_gbps, double time_us, const std::vector<Warning>& warnings,
                                    const Expectation& expected, const VerdictContext& context) {
    std::vector<std::string> causes;
    if (!context.transport_note.empty()) causes.push_back(context.transport_note);
    if (expected.level == "cross-host" && busbw_gbps < socket_like_gbps && expected.busbw_gbps > 2.0 * socket_like_gbps)
        causes.push_back("a busbw of " + figure(busbw_gbps) + " GB/s is what TCP sockets carry: check the transport "
                         "(--nccl-choices, NCCL_DEBUG_SUBSYS=NET)");
    if (has_kind(warnings, "straggler")) causes.push_back("a straggler rank held the others (see its warning)");
    if (has_kind(warnings, "preempted")) causes.push_back("ranks were preempted inside the timed loop");
    if (has_kind(warnings, "page-faults")) causes.push_back("page faults inside the timed loop");
    if (context.oversubscribed) causes.push_back("more ranks than cores: ranks time-share the cores");
    if (has_kind(warnings, "wide-spread") || has_kind(warnings, "outliers") || has_kind(warnings, "bimodal"))
        causes.push_back("noisy samples (see the point's warnings)");
    if (expected.bound == "latency")
        causes.push_back("latency-bound: " + figure(time_us) + " us per call against " + figure(expected.time_us) +
                         " us expected (" + figure(expected.latency_us) +
                         " us of it latency): per-call overhead above the links'");
    else
        causes.push_back("bandwidth-bound: " + figure(busbw_gbps) + " GB/s against " + figure(expected.busbw_gbps) +
                         " GB/s the " + expected.level + " links give with " + expected.algorithm);
    return causes;
}

}  // namespace

PointVerdict judge_point(double busbw_gbps, double time_us, const std::vector<Warning>& warnings,
                         const Expectation& expected, const VerdictContext& context) {
    PointVerdict verdict;
    verdict.expected = expected;
    verdict.ratio = expected.busbw_gbps > 0.0 ? busbw_gbps / expected.busbw_gbps : 0.0;
    if (verdict.ratio > verdict_above_ratio) {
        verdict.verdict = "ABOVE";
        verdict.cause = "faster than the model allows (" + figure(verdict.ratio) + "x): the model is wrong here, its " +
                        expected.bound + " term (" + expected.algorithm + ", " + expected.source +
                        ") overstates the cost; e.g. the data stayed in a cache the measurement did not, or the "
                        "library took a path the model lacks";
    } else if (verdict.ratio < verdict_low_ratio) {
        verdict.verdict = "LOW";
        const std::vector<std::string> causes = low_causes(busbw_gbps, time_us, warnings, expected, context);
        for (std::size_t i = 0; i < causes.size() && i < 2; ++i) verdict.cause += (i ? "; " : "") + causes[i];
    } else {
        verdict.verdict = "ok";
    }
    return verdict;
}

nlohmann::json to_json(const PointVerdict& verdict) {
    return {{"expected", to_json(verdict.expected)},
            {"ratio", verdict.ratio},
            {"verdict", verdict.verdict},
            {"verdict_cause", verdict.cause.empty() ? nlohmann::json(nullptr) : nlohmann::json(verdict.cause)}};
}

}  // namespace parbench

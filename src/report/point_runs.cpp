#include "report/point_runs.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace parbench {
namespace detail {
namespace {

// The regularised incomplete beta function I_x(a, b) by its continued fraction (DLMF 8.17.22),
// evaluated with the modified Lentz method; the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) keeps x
// where the fraction converges fast.
double incomplete_beta(double a, double b, double x) {
    if (x <= 0.0) return 0.0;
    if (x >= 1.0) return 1.0;
    if (x > (a + 1.0) / (a + b + 2.0)) return 1.0 - incomplete_beta(b, a, 1.0 - x);
    constexpr double tiny = 1e-300;
    const auto guard = [](double v) { return std::fabs(v) < tiny ? tiny : v; };
    double c = 1.0;
    double d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));
    double fraction = d;
    for (int m = 1; m <= 500; ++m) {
        const double even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        fraction *= d * c;
        const double odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        const double step = d * c;
        fraction *= step;
        if (std::fabs(step - 1.0) < 1e-15) break;
    }
    const double front = std::exp(a * std::log(x) + b * std::log1p(-x) + std::lgamma(a + b) - std::lgamma(a) -
                                  std::lgamma(b));
    return front * fraction / a;
}

// P(T > t) for t >= 0.
double t_upper_tail(double t, double df) { return 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t)); }

}  // namespace

double student_t_quantile(double p, double df) {
    if (p == 0.5) return 0.0;
    if (p < 0.5) return -student_t_quantile(1.0 - p, df);
    const double tail = 1.0 - p;
    double low = 0.0, high = 1.0;
    while (t_upper_tail(high, df) > tail && high < 1e12) high *= 2.0;
    for (int i = 0; i < 200 && high - low > 1e-12 * high; ++i) {
        const double middle = 0.5 * (low + high);
        (t_upper_tail(middle, df) > tail ? low : high) = middle;
    }
    return 0.5 * (low + high);
}

}  // namespace detail

double per_interval_confidence(double family, std::size_t intervals) {
    return intervals <= 1 ? family : 1.0 - (1.0 - family) / static_cast<double>(intervals);
}

NoiseVerdict between_runs_ratio(const std::vector<double>& first, const std::vector<double>& other, double observed,
                                double confidence) {
    NoiseVerdict verdict;
    verdict.source = NoiseSource::between_runs;
    verdict.runs = {first.size(), other.size()};
    const auto usable = [](const std::vector<double>& times) {
        return !times.empty() && std::all_of(times.begin(), times.end(), [](double t) { return t > 0 && std::isfinite(t); });
    };
    if (!usable(first) || !usable(other) || !(observed > 0) || !std::isfinite(observed)) return verdict;
    const auto uninterrupted = [&verdict](const std::vector<double>& times) {
        std::vector<double> sorted = times;
        std::sort(sorted.begin(), sorted.end());
        const std::size_t half = sorted.size() / 2;
        const double median = sorted.size() % 2 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2.0;
        std::vector<double> kept;
        for (double t : times)
            if (t <= 2.0 * median) kept.push_back(t);
        verdict.interrupted += times.size() - kept.size();
        return kept;
    };
    const std::vector<double> a = uninterrupted(first);
    const std::vector<double> b = uninterrupted(other);
    verdict.runs = {a.size(), b.size()};
    if (a.size() < 2 && b.size() < 2) return verdict;
    // Squared deviations of the log times from each column's mean, pooled.
    double squares = 0.0;
    for (const std::vector<double>* times : {&a, &b}) {
        double mean = 0.0;
        for (double t : *times) mean += std::log(t);
        mean /= static_cast<double>(times->size());
        for (double t : *times) squares += (std::log(t) - mean) * (std::log(t) - mean);
    }
    const double df = static_cast<double>(a.size() + b.size() - 2);
    const double error =
        std::sqrt(squares / df * (1.0 / static_cast<double>(a.size()) + 1.0 / static_cast<double>(b.size())));
    const double half = detail::student_t_quantile(0.5 + confidence / 2.0, df) * error;
    verdict.judged = true;
    verdict.low = observed * std::exp(-half);
    verdict.high = observed * std::exp(half);
    return verdict;
}

LabelledReport merge_runs(const std::string& label, const std::vector<LabelledReport>& runs, bool allow_partial) {
    LabelledReport merged{label, nlohmann::json()};
    int sweeps = 0;  // numbered so far
    for (const LabelledReport& run : runs) {
        check_collective_report(run);
        check_report_status(run, allow_partial);
        if (merged.document.is_null()) {
            merged.document = run.document;
            merged.document["results"] = nlohmann::json::array();
        }
        int last = 0;
        for (nlohmann::json entry : run.document["results"]) {
            const int sweep = entry.contains("repetition") && entry["repetition"].is_number_integer()
                                  ? entry["repetition"].get<int>()
                                  : 1;
            last = std::max(last, sweep);
            entry["repetition"] = sweeps + sweep;
            merged.document["results"].push_back(std::move(entry));
        }
        sweeps += last;
        if (run.document.value("status", "") == "partial") merged.document["status"] = "partial";
    }
    return merged;
}

}  // namespace parbench

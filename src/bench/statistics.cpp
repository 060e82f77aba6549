#include "bench/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/percentile.hpp"

namespace parbench {
namespace {

std::vector<double> sorted_copy(std::span<const double> samples) {
    std::vector<double> sorted(samples.begin(), samples.end());
    std::sort(sorted.begin(), sorted.end());
    return sorted;
}

}  // namespace

Summary summarize(std::span<const double> samples) {
    Summary summary;
    summary.count = samples.size();
    if (samples.empty()) return summary;
    const std::vector<double> sorted = sorted_copy(samples);
    summary.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(sorted.size());
    summary.median = sorted_percentile(sorted, 0.5);
    summary.min = sorted.front();
    summary.max = sorted.back();
    summary.p95 = sorted_percentile(sorted, 0.95);
    if (sorted.size() > 1) {
        double squares = 0.0;
        for (double x : sorted) squares += (x - summary.mean) * (x - summary.mean);
        summary.stddev = std::sqrt(squares / static_cast<double>(sorted.size() - 1));
    }
    return summary;
}

std::size_t count_outliers(std::span<const double> samples) {
    if (samples.size() < 3) return 0;
    const std::vector<double> sorted = sorted_copy(samples);
    const double median = sorted_percentile(sorted, 0.5);
    std::vector<double> deviations;
    deviations.reserve(sorted.size());
    for (double x : sorted) deviations.push_back(std::abs(x - median));
    std::sort(deviations.begin(), deviations.end());
    const double mad = sorted_percentile(deviations, 0.5);
    if (mad == 0.0) return 0;
    return static_cast<std::size_t>(std::count_if(sorted.begin(), sorted.end(), [&](double x) {
        return std::abs(0.6745 * (x - median) / mad) > 3.5;
    }));
}

std::vector<Warning> sample_warning_list(std::span<const double> samples, const SampleFlags& flags) {
    std::vector<Warning> warnings;
    if (samples.size() < 3) return warnings;
    const Summary summary = summarize(samples);
    const double relative_spread = summary.mean > 0.0 ? summary.stddev.value_or(0.0) / summary.mean : 0.0;
    if (summary.median > 0.0 && (summary.p95 > 2.0 * summary.median || relative_spread > 0.25)) {
        std::ostringstream text;
        text.precision(3);
        text << "samples are spread wide (stddev " << 100.0 * relative_spread << "% of the mean, p95 "
             << summary.p95 / summary.median
             << "x the median; other load or oversubscribed cores?): raise " << flags.samples
             << ", pin ranks, or compare medians of alternating runs";
        warnings.push_back({"wide-spread", text.str()});
    }
    const std::size_t outliers = count_outliers(samples);
    if (outliers * 10 > samples.size()) {
        std::ostringstream text;
        text << outliers << " of " << samples.size()
             << " samples are outliers (modified z-score > 3.5); the distribution may be bimodal: "
                "check for interference and raise "
             << flags.warmup;
        warnings.push_back({"outliers", text.str()});
    }
    if (summary.median > 0.0 && samples.front() > 5.0 * summary.median) {
        warnings.push_back({"slow-first-sample",
                            "the first timed sample is over 5x the median: warm-up was too short; raise " +
                                std::string(flags.warmup)});
    }
    return warnings;
}

std::vector<std::string> sample_warnings(std::span<const double> samples, const SampleFlags& flags) {
    std::vector<std::string> texts;
    for (Warning& warning : sample_warning_list(samples, flags)) texts.push_back(std::move(warning.text));
    return texts;
}

}  // namespace parbench

// Statistics as pure functions over samples, apart from timing and reporting. A statistic
// that one sample cannot define (stddev) is absent, never zero.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parbench {

struct Summary {
    std::size_t count = 0;
    double mean = 0.0;
    double median = 0.0;
    double min = 0.0;
    double max = 0.0;
    double p95 = 0.0;
    std::optional<double> stddev;  // sample standard deviation (n-1); absent for one sample
};

Summary summarize(std::span<const double> samples);

// Samples whose modified z-score (0.6745 (x - median) / MAD, Iglewicz-Hoaglin) exceeds 3.5.
std::size_t count_outliers(std::span<const double> samples);

// The flags a warning tells the user to raise: the collective harness's by default.
struct SampleFlags {
    std::string_view samples = "--iters";
    std::string_view warmup = "--warmup";
};

// A warning with a short stable kind, so a run can tally how many points drew which.
struct Warning {
    std::string kind;  // "wide-spread", "outliers", "slow-first-sample", ...
    std::string text;  // what was seen and what to change
};

// Warnings, each with what to change, when the samples look untrustworthy: a wide spread,
// many outliers, a first sample far slower than the rest.
std::vector<Warning> sample_warning_list(std::span<const double> samples, const SampleFlags& flags = {});
// The same, text only.
std::vector<std::string> sample_warnings(std::span<const double> samples, const SampleFlags& flags = {});

}  // namespace parbench

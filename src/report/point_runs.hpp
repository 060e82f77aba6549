// compare's run-to-run noise (issue 32). A point measured once per report has only the spread of
// its own iterations, and that is not the spread between runs: on the 2-core host two runs of
// one command differ by more than either run's iterations suggest, so an interval from the
// iterations alone called identical runs different (18 pairs of identical runs out of 18 failed
// --threshold 0.9). The runs of a point are what tells: the sweeps of a report made with
// --repeat K (report/repetitions.hpp), and the reports of one column, given to compare as
// "a.json,b.json" (merge_runs). From the runs' times the ratio of two columns gets a t interval
// on the log scale with the runs' pooled variance, at a confidence that holds for every point
// compared at once (Bonferroni), since a gate fails when any one point does.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report/compare.hpp"

namespace parbench {

// Several reports of one run configuration as one: the results of all, each report's sweeps
// numbered on from the previous report's ("repetition"), under the first report's frame. Each
// must be a collective report whose status compare accepts (report/compare.hpp), else
// UsageError naming it; `label` names the column.
LabelledReport merge_runs(const std::string& label, const std::vector<LabelledReport>& runs, bool allow_partial);

// The interval of the busbw ratio of `other` to `first` at `confidence` (two-sided), centred on
// `observed`, from each column's run times (one per run: its reported time), judged when at least
// one column has two runs: log times, variance pooled over both columns' runs (the same point on
// the same machines), Student's t with their degrees of freedom. Not judged otherwise.
// A run slower than twice its column's median run is left out as interrupted (a rank descheduled
// through most of the point: on the loaded 2-core host such runs read 10 to 400 times the
// others, and one would widen the interval past any use); runs vary less than that when nothing
// interrupts them, so the rule leaves the interval's coverage as it was (about 5 % outside at
// 95 % with 5 + 5 runs of log-normal spread 0.1, simulated), and the verdict counts them.
NoiseVerdict between_runs_ratio(const std::vector<double>& first, const std::vector<double>& other, double observed,
                                double confidence);

// The confidence each of `intervals` intervals needs for all of them to hold together at
// `family` (Bonferroni: 1 - (1 - family) / intervals).
double per_interval_confidence(double family, std::size_t intervals);

namespace detail {
// Student's t distribution: the value t with P(T <= t) = p, for `df` degrees of freedom (> 0),
// p in (0, 1). From the regularised incomplete beta function (DLMF 8.17.22's continued fraction).
double student_t_quantile(double p, double df);
}  // namespace detail

}  // namespace parbench

// Percentiles of samples, for every layer that summarizes measurements (bench's statistics,
// plan's calibrations): linear interpolation between closest ranks (the "R-7" definition numpy
// uses by default), so the median of an even count is the mean of the middle two.
#pragma once

#include <span>
#include <vector>

namespace parbench {

// 0 for no samples.
double sorted_percentile(const std::vector<double>& sorted, double fraction);  // `sorted` ascending
double percentile(std::span<const double> samples, double fraction);

}  // namespace parbench

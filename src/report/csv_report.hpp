// The collective results as CSV, one row per point, for spreadsheets and plotting.
#pragma once

#include <string>
#include <vector>

#include "report/collective_result.hpp"

namespace parbench {

std::string to_csv(const std::vector<CollectiveResult>& results);

}  // namespace parbench

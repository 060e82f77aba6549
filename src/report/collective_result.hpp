// One measured (collective, size) point: the raw samples, their statistics and the
// bandwidths derived from the median, in nccl-tests' conventions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/statistics.hpp"
#include "core/dtype.hpp"

namespace parbench {

struct CollectiveResult {
    std::string collective;
    std::uint64_t bytes = 0;            // measured size (nccl-tests' convention for the collective)
    std::uint64_t requested_bytes = 0;  // as asked; larger when rounded down to whole slices
    std::size_t count = 0;              // elements of the full buffer
    DType dtype = DType::float32;
    std::optional<ReduceOp> op;         // reducing collectives only
    std::optional<int> root;            // rooted collectives only
    bool inplace = false;
    std::vector<double> samples_us;
    Summary time_us;
    double bus_factor = 1.0;
    double algbw_gbps = 0.0;            // bytes / median time, decimal GB/s
    double busbw_gbps = 0.0;            // algbw x bus_factor
    std::optional<std::uint64_t> wrong; // when checked
    std::size_t outliers = 0;
    std::vector<std::string> warnings;
    std::optional<std::string> skipped; // why the point was not measured
};

// Fills the statistics and bandwidths from samples_us, bytes and bus_factor.
void derive_statistics(CollectiveResult& result);
nlohmann::json to_json(const CollectiveResult& result);

}  // namespace parbench

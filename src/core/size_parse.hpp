// Byte sizes as users write them: plain bytes or a K/M/G/T suffix (binary, as nccl-tests).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parbench {

// Throws UsageError naming `flag` for anything that is not a positive size.
std::uint64_t parse_size(std::string_view text, std::string_view flag);
std::string format_size(std::uint64_t bytes);  // "8B", "1KiB", "1.5MiB"
// min, min*factor, ... up to max inclusive; factor 1 means max only once after min
std::vector<std::uint64_t> geometric_sizes(std::uint64_t min, std::uint64_t max, double factor);
// min, min+step, ... up to max inclusive (nccl-tests' -i/--stepbytes); step > 0
std::vector<std::uint64_t> linear_sizes(std::uint64_t min, std::uint64_t max, std::uint64_t step);

}  // namespace parbench

// Before any buffer of a collective run exists: every point's call through the data
// communicator's argument check (Communicator::check_arguments), so that a size the library
// cannot take (MPI's int counts and displacements) is refused at once, naming the flag that set
// it, rather than after allocating and touching gigabytes (issue 32: `alltoallv --size 2049M
// --dtype int8` was refused only after 22 s).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "collectives/collective.hpp"
#include "comm/communicator.hpp"

namespace parbench {

struct PlannedPoint {
    const Collective* collective = nullptr;
    std::size_t count = 0;  // elements of the full buffer (collective.hpp)
};

// The first point whose call `data` refuses, as "SIZE_FLAG: COLLECTIVE of DTYPE at N B: WHY";
// nothing when every call can be made. Makes no call; local to this rank.
std::optional<std::string> call_arguments_refusal(Communicator& data, const std::vector<PlannedPoint>& points,
                                                  const CollectiveParams& params, const std::string& size_flag);

}  // namespace parbench

#include "cli/call_arguments_check.hpp"

#include "core/error.hpp"

namespace parbench {

std::optional<std::string> call_arguments_refusal(Communicator& data, const std::vector<PlannedPoint>& points,
                                                  const CollectiveParams& params, const std::string& size_flag) {
    // Stand-ins for the buffers: the check only computes with their addresses (an in-place
    // call is told apart by them), and the counts do not depend on where the buffers lie.
    char send_stand_in = 0;
    char recv_stand_in = 0;
    for (const PlannedPoint& point : points) {
        if (point.count == 0) continue;  // skipped, never called
        try {
            data.check_arguments(
                [&] { point.collective->run(data, &send_stand_in, &recv_stand_in, point.count, params); });
        } catch (const UsageError& refused) {
            return size_flag + ": " + std::string(point.collective->name()) + " of " +
                   std::string(dtype_name(params.type)) + " at " +
                   std::to_string(point.count * dtype_size(params.type)) + " B: " + refused.what();
        }
    }
    return std::nullopt;
}

}  // namespace parbench

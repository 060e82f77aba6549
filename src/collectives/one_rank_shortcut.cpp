#include "collectives/one_rank_shortcut.hpp"

#include <array>

namespace parbench {

std::optional<std::string> one_rank_shortcut(const Collective& collective, std::string_view backend, int ranks,
                                             const CollectiveParams& params) {
    constexpr std::array<std::string_view, 5> copied{"allreduce", "allgather", "reducescatter", "broadcast", "reduce"};
    if (backend != "nccl" || ranks != 1) return std::nullopt;
    bool shortcut = false;
    for (std::string_view name : copied) shortcut = shortcut || collective.name() == name;
    if (!shortcut) return std::nullopt;
    if (collective.reducing() && params.op == ReduceOp::avg && is_floating(params.type)) return std::nullopt;
    return "one rank on NCCL: no collective runs, only a copy of the send buffer into the receive buffer (in "
           "place, nothing), so time and algbw are a device copy's and busbw is no link's bandwidth";
}

double point_bus_factor(const Collective& collective, int ranks, bool one_rank_copy) {
    return one_rank_copy ? 0.0 : collective.bus_factor(ranks);
}

}  // namespace parbench

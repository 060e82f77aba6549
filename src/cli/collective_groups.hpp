// --groups: the world split into sub-communicators that run the same collective at once
// (nccl-tests' NCCL_TESTS_SPLIT, named by placement): `host` one group per host, `cross-host`
// one group per local rank index (rank i of every host), `N` consecutive groups of N ranks.
// Each group is timed as its own job; the report gives every group's bus bandwidth and the
// minimum across groups. Against each other, `host` and `cross-host` show the bandwidth
// pyramid: inside a host (shared memory, NVLink) against across hosts (the network).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace parbench {

struct GroupsSpec {
    std::string text;  // as given: host, cross-host or N
    int size = 0;      // for N
};

// UsageError naming --groups for anything but host, cross-host or a whole number >= 2.
std::optional<GroupsSpec> parse_groups(const std::string& text);

struct GroupLayout {
    std::vector<std::vector<int>> groups;  // world ranks of every group, ascending
    int mine = 0;                          // the index of this rank's group
};

// UsageError when the groups do not divide the world into equal groups of 2 or more ranks.
GroupLayout layout_groups(const GroupsSpec& spec, const std::vector<std::string>& hosts_by_rank, int world_rank);

}  // namespace parbench

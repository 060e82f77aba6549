// --groups: the layouts, and refusals that say what the job lacks (more ranks per host for
// `host`, more hosts for `cross-host`).
#include "cli/collective_groups.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"

namespace parbench {
namespace {

std::string refusal(const std::string& spec, const std::vector<std::string>& hosts) {
    try {
        layout_groups(*parse_groups(spec), hosts, 0);
    } catch (const UsageError& error) {
        return error.what();
    }
    return "";
}

TEST(CollectiveGroups, HostAndCrossHostPlaceTheRanks) {
    const std::vector<std::string> hosts{"a", "a", "b", "b"};
    EXPECT_EQ(layout_groups(*parse_groups("host"), hosts, 2).groups, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
    const GroupLayout cross = layout_groups(*parse_groups("cross-host"), hosts, 3);
    EXPECT_EQ(cross.groups, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
    EXPECT_EQ(cross.mine, 1);
}

TEST(CollectiveGroups, CrossHostOnOneHostAsksForMoreHosts) {
    const std::string text = refusal("cross-host", {"a", "a"});
    EXPECT_NE(text.find("run on 2 or more hosts"), std::string::npos) << text;
    EXPECT_EQ(text.find("more ranks per host"), std::string::npos) << text;
}

TEST(CollectiveGroups, HostWithOneRankPerHostAsksForMoreRanksPerHost) {
    const std::string text = refusal("host", {"a", "b"});
    EXPECT_NE(text.find("launch 2 or more ranks on each host"), std::string::npos) << text;
    EXPECT_EQ(text.find("more hosts"), std::string::npos) << text;
}

}  // namespace
}  // namespace parbench

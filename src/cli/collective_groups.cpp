#include "cli/collective_groups.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace parbench {

std::optional<GroupsSpec> parse_groups(const std::string& text) {
    if (text.empty()) return std::nullopt;
    if (text == "host" || text == "cross-host") return GroupsSpec{text, 0};
    std::size_t used = 0;
    int size = 0;
    try {
        size = std::stoi(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || size < 2)
        throw UsageError("--groups '" + text + "': use host (one group per host), cross-host (one per local rank) "
                         "or a group size N of 2 or more that divides the world");
    return GroupsSpec{text, size};
}

GroupLayout layout_groups(const GroupsSpec& spec, const std::vector<std::string>& hosts_by_rank, int world_rank) {
    const int world = static_cast<int>(hosts_by_rank.size());
    std::vector<int> color(hosts_by_rank.size());
    if (spec.size > 0) {
        if (world % spec.size != 0)
            throw UsageError("--groups " + spec.text + " does not divide the " + std::to_string(world) +
                             " ranks; use a group size that divides " + std::to_string(world));
        for (int r = 0; r < world; ++r) color[static_cast<std::size_t>(r)] = r / spec.size;
    } else {
        std::vector<std::string> hosts;
        std::map<std::string, int> seen_on_host;
        for (int r = 0; r < world; ++r) {
            const std::string& host = hosts_by_rank[static_cast<std::size_t>(r)];
            if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
            const int host_index = static_cast<int>(std::find(hosts.begin(), hosts.end(), host) - hosts.begin());
            color[static_cast<std::size_t>(r)] = spec.text == "host" ? host_index : seen_on_host[host]++;
        }
    }
    GroupLayout layout;
    std::map<int, std::vector<int>> by_color;
    for (int r = 0; r < world; ++r) by_color[color[static_cast<std::size_t>(r)]].push_back(r);
    for (auto& [c, ranks] : by_color) {
        if (c == color[static_cast<std::size_t>(world_rank)]) layout.mine = static_cast<int>(layout.groups.size());
        layout.groups.push_back(ranks);
    }
    const std::size_t first = layout.groups.front().size();
    const bool equal = std::all_of(layout.groups.begin(), layout.groups.end(),
                                   [&](const std::vector<int>& g) { return g.size() == first; });
    if (!equal)
        throw UsageError("--groups " + spec.text + ": the hosts run different numbers of ranks, so the groups would "
                         "differ in size; launch the same number of ranks on every host");
    // A group of one: host has one rank per host (it needs more ranks on each host), cross-host
    // one host (it needs more hosts), N can not (its size is 2 or more).
    if (first < 2 && spec.text == "host")
        throw UsageError("--groups host makes groups of 1 rank (one rank per host); a collective needs 2 or more: "
                         "launch 2 or more ranks on each host, or use --groups cross-host");
    if (first < 2)
        throw UsageError("--groups cross-host makes groups of 1 rank: every rank runs on one host, and a cross-host "
                         "group takes one rank from each host; run on 2 or more hosts, or use --groups host or N");
    return layout;
}

}  // namespace parbench

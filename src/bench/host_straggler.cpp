#include "bench/host_straggler.hpp"

#include <algorithm>

#include "bench/statistics.hpp"

namespace parbench {

std::optional<HostStraggler> find_host_straggler(const std::vector<std::vector<double>>& figure_by_rank,
                                                 const std::vector<std::string>& hosts_by_rank,
                                                 const HostStragglerRule& rule) {
    if (figure_by_rank.empty() || figure_by_rank.size() != hosts_by_rank.size()) return std::nullopt;
    const std::size_t samples = figure_by_rank.front().size();
    if (samples == 0) return std::nullopt;
    for (const auto& figures : figure_by_rank)
        if (figures.size() != samples) return std::nullopt;

    // Hosts in the order of their first rank, each with its ranks.
    std::vector<std::string> hosts;
    std::vector<std::vector<std::size_t>> ranks_of_host;
    for (std::size_t rank = 0; rank < hosts_by_rank.size(); ++rank) {
        const auto found = std::find(hosts.begin(), hosts.end(), hosts_by_rank[rank]);
        if (found == hosts.end()) {
            hosts.push_back(hosts_by_rank[rank]);
            ranks_of_host.push_back({rank});
        } else {
            ranks_of_host[static_cast<std::size_t>(found - hosts.begin())].push_back(rank);
        }
    }
    if (hosts.size() < 2) return std::nullopt;

    // figure[host][sample]: the mean over the host's ranks.
    std::vector<std::vector<double>> figure(hosts.size(), std::vector<double>(samples, 0.0));
    for (std::size_t h = 0; h < hosts.size(); ++h)
        for (std::size_t s = 0; s < samples; ++s) {
            for (std::size_t rank : ranks_of_host[h]) figure[h][s] += figure_by_rank[rank][s];
            figure[h][s] /= static_cast<double>(ranks_of_host[h].size());
        }

    std::vector<int> slowest_count(hosts.size(), 0);
    for (std::size_t s = 0; s < samples; ++s) {
        std::size_t slowest = 0;
        for (std::size_t h = 1; h < hosts.size(); ++h)
            if (figure[h][s] > figure[slowest][s]) slowest = h;
        ++slowest_count[slowest];
    }
    const auto named = static_cast<std::size_t>(std::max_element(slowest_count.begin(), slowest_count.end()) -
                                                slowest_count.begin());

    std::vector<double> others_medians, excesses;
    for (std::size_t s = 0; s < samples; ++s) {
        std::vector<double> others;
        for (std::size_t h = 0; h < hosts.size(); ++h)
            if (h != named) others.push_back(figure[h][s]);
        const double others_median = summarize(others).median;
        others_medians.push_back(others_median);
        excesses.push_back(figure[named][s] - others_median);
    }

    HostStraggler found;
    found.host = hosts[named];
    found.ranks = static_cast<int>(ranks_of_host[named].size());
    found.samples_slowest = slowest_count[named];
    found.samples = static_cast<int>(samples);
    found.figure = summarize(figure[named]).median;
    found.others_median = summarize(others_medians).median;
    found.excess = summarize(excesses).median;
    for (std::size_t h = 0; h < hosts.size(); ++h) found.median_by_host.emplace_back(hosts[h], summarize(figure[h]).median);
    found.consistent = found.samples >= rule.min_samples && found.excess > 0.0 &&
                       found.samples_slowest >= rule.min_share_of_samples * static_cast<double>(found.samples) &&
                       found.excess >= rule.min_excess && found.excess >= rule.min_excess_share * found.others_median;
    return found;
}

}  // namespace parbench

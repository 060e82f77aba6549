// How alltoallv cuts each rank's buffer into per-destination blocks: the imbalance a
// mixture-of-experts router produces (--skew). Every rank routes alike, as when experts
// are popular or unpopular for every rank's tokens at once (a hot expert is hot for all):
//
//   the seed draws a popularity order of the ranks (position 0 the most popular), and
//   destination weights follow the order:
//     uniform  every destination weight 1: the even alltoall (the seed only decides which
//              destinations get the one extra element when the count does not divide)
//     zipf:S   the destination at position p weighs 1 / (p+1)^S (S >= 0; S = 0 is uniform)
//     hot:K    the K destinations first in the order (1 <= K <= n) receive 90% of every
//              rank's traffic, split evenly, and the other n-K the remaining 10%; when K is
//              above 0.9 n that would give a hot destination less than a cold one, so then
//              every destination weighs the same (K = n is uniform)
//
// A rank's `count` elements are apportioned over the weights exactly (largest remainder,
// ties to the more popular destination), in integers, so every rank computes the same
// blocks bit for bit. Every rank sends `count` in total (balanced, as every rank routes the
// same number of tokens); receives differ: destination d gets n x block d.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parbench {

struct Skew {
    enum class Kind { uniform, zipf, hot };
    Kind kind = Kind::uniform;
    double exponent = 0.0;  // zipf's S
    int hot = 0;            // hot's K
    std::uint64_t seed = 1;
};

// Which way alltoallv moves the blocks (--direction), the two all-to-alls of an MoE layer:
//   dispatch  every rank sends block d of its `count` elements to rank d (tokens to the ranks of
//             their experts): every rank sends `count`, rank d receives n x block d
//   combine   the transpose: rank d sends each source back the block d it received from it (the
//             experts' outputs back to the tokens' ranks): rank d sends n x block d, every rank
//             receives `count`
// The same bytes cross the network either way; under skew the busiest rank is the busiest
// receiver in the dispatch and the busiest sender in the combine.
enum class ExchangeDirection { dispatch, combine };
// "dispatch" or "combine"; otherwise UsageError naming --direction.
ExchangeDirection parse_direction(const std::string& text);
std::string direction_name(ExchangeDirection direction);

// Parses "uniform", "zipf:S" or "hot:K"; the reason it is refused otherwise, naming --skew.
// K's upper bound (the rank count) is checked by skew_refusal once the ranks are known.
Skew parse_skew(const std::string& text, std::uint64_t seed);
// "uniform", "zipf:1.2", "hot:2"; zipf's exponent exactly (core/exact_number.hpp): "zipf:1.000004"
// is not zipf:1, and ranks, reports and compare tell them apart.
std::string skew_name(const Skew& skew);
// Why `skew` does not fit `nranks` ranks (hot:K with K > n), naming --skew; nothing if it does.
std::optional<std::string> skew_refusal(const Skew& skew, int nranks);

// The ranks in popularity order, drawn from the seed (Fisher-Yates over splitmix64, so the
// same on every host and compiler).
std::vector<int> popularity_order(int nranks, std::uint64_t seed);

// Each of n destinations' weight, indexed by destination (not by popularity), summing to 1:
// the distribution destination_counts apportions, for a caller that draws from it (an MoE
// router's top-k over experts: bench/moe_dispatch.hpp).
std::vector<double> destination_weights(int n, const Skew& skew);

// Elements every rank sends to each destination rank (indexed by rank): sums to `count`.
std::vector<std::size_t> destination_counts(std::size_t count, int nranks, const Skew& skew);

}  // namespace parbench

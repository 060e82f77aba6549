#include "collectives/skew.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "core/exact_number.hpp"

namespace parbench {
namespace {

const char* const skew_forms = "use uniform, zipf:S (S >= 0, e.g. zipf:1.2) or hot:K (1 <= K <= ranks, e.g. hot:2)";

// Steele, Lea and Flood's splitmix64 (OOPSLA 2014): a stream of 64-bit values fixed by the
// seed alone, unlike std:: distributions, whose output the standard leaves to each library.
class SplitMix64 {
  public:
    explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

  private:
    std::uint64_t state_;
};

// Integer weights by popularity position, so the apportionment is exact. zipf's are
// 2^40 / (p+1)^S rounded: its one floating-point step, the same on every rank.
std::vector<std::uint64_t> weights_by_position(int nranks, const Skew& skew) {
    const auto n = static_cast<std::size_t>(nranks);
    std::vector<std::uint64_t> weights(n, 1);
    switch (skew.kind) {
        case Skew::Kind::uniform: break;
        case Skew::Kind::zipf:
            for (std::size_t p = 0; p < n; ++p)
                weights[p] = static_cast<std::uint64_t>(
                    std::llround(std::ldexp(std::pow(static_cast<double>(p + 1), -skew.exponent), 40)));
            break;
        case Skew::Kind::hot: {
            // Hot each 0.9 / K, cold each 0.1 / (n-K): in integers 9 (n-K) against K.
            const auto hot = static_cast<std::uint64_t>(skew.hot);
            const std::uint64_t cold_count = n - hot;
            if (9 * cold_count >= hot)
                for (std::size_t p = 0; p < n; ++p) weights[p] = p < hot ? 9 * cold_count : hot;
            break;
        }
    }
    return weights;
}

}  // namespace

ExchangeDirection parse_direction(const std::string& text) {
    if (text == "dispatch") return ExchangeDirection::dispatch;
    if (text == "combine") return ExchangeDirection::combine;
    throw UsageError("--direction '" + text + "': use dispatch (every rank sends its blocks to their destinations) "
                     "or combine (the transpose: each destination sends the blocks back)");
}

std::string direction_name(ExchangeDirection direction) {
    return direction == ExchangeDirection::combine ? "combine" : "dispatch";
}

Skew parse_skew(const std::string& text, std::uint64_t seed) {
    Skew skew;
    skew.seed = seed;
    if (text == "uniform") return skew;
    const std::size_t colon = text.find(':');
    const std::string kind = text.substr(0, colon);
    const std::string value = colon == std::string::npos ? std::string() : text.substr(colon + 1);
    if (kind == "zipf" && !value.empty()) {
        std::size_t used = 0;
        double exponent = -1.0;
        try {
            exponent = std::stod(value, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != value.size() || !std::isfinite(exponent) || exponent < 0.0)
            throw UsageError("--skew '" + text + "': zipf's exponent S must be a number, 0 or more (zipf:0 is "
                             "uniform, zipf:1 the classic Zipf law); " + skew_forms);
        skew.kind = Skew::Kind::zipf;
        skew.exponent = exponent;
        return skew;
    }
    if (kind == "hot" && !value.empty()) {
        const bool digits = value.size() <= 9 && std::all_of(value.begin(), value.end(), [](char c) {
                                return c >= '0' && c <= '9';
                            });
        if (!digits || std::stoi(value) < 1)
            throw UsageError("--skew '" + text + "': hot's K, the number of hot destinations, must be a whole number "
                             "from 1 to the rank count; " + skew_forms);
        skew.kind = Skew::Kind::hot;
        skew.hot = std::stoi(value);
        return skew;
    }
    throw UsageError("--skew '" + text + "': unknown distribution; " + skew_forms);
}

std::string skew_name(const Skew& skew) {
    switch (skew.kind) {
        case Skew::Kind::uniform: return "uniform";
        case Skew::Kind::zipf: return "zipf:" + exact_number_text(skew.exponent);
        case Skew::Kind::hot: return "hot:" + std::to_string(skew.hot);
    }
    return "uniform";
}

std::optional<std::string> skew_refusal(const Skew& skew, int nranks) {
    if (skew.kind == Skew::Kind::hot && skew.hot > nranks)
        return "--skew " + skew_name(skew) + ": " + std::to_string(skew.hot) + " hot destinations among " +
               std::to_string(nranks) + " ranks; K must be from 1 to " + std::to_string(nranks);
    return std::nullopt;
}

std::vector<int> popularity_order(int nranks, std::uint64_t seed) {
    std::vector<int> order(static_cast<std::size_t>(nranks));
    std::iota(order.begin(), order.end(), 0);
    SplitMix64 random(seed);
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[random.next() % i]);
    return order;
}

std::vector<double> destination_weights(int n, const Skew& skew) {
    const std::vector<std::uint64_t> by_position = weights_by_position(n, skew);
    const double total = static_cast<double>(std::accumulate(by_position.begin(), by_position.end(), std::uint64_t{0}));
    const std::vector<int> order = popularity_order(n, skew.seed);
    std::vector<double> weights(static_cast<std::size_t>(n));
    for (std::size_t p = 0; p < weights.size(); ++p)
        weights[static_cast<std::size_t>(order[p])] = static_cast<double>(by_position[p]) / total;
    return weights;
}

std::vector<std::size_t> destination_counts(std::size_t count, int nranks, const Skew& skew) {
    const auto n = static_cast<std::size_t>(nranks);
    const std::vector<std::uint64_t> weights = weights_by_position(nranks, skew);
    const unsigned __int128 total = std::accumulate(weights.begin(), weights.end(), static_cast<unsigned __int128>(0));
    // Each position's quota count x w / total, floored, and what the floor dropped.
    std::vector<std::size_t> by_position(n);
    std::vector<unsigned __int128> dropped(n);
    std::size_t assigned = 0;
    for (std::size_t p = 0; p < n; ++p) {
        const unsigned __int128 quota = static_cast<unsigned __int128>(count) * weights[p];
        by_position[p] = static_cast<std::size_t>(quota / total);
        dropped[p] = quota % total;
        assigned += by_position[p];
    }
    // Largest remainder: the count - assigned (< n) elements left go one each to the
    // positions that lost most to the floor, the more popular first among equals.
    std::vector<std::size_t> positions(n);
    std::iota(positions.begin(), positions.end(), 0);
    std::stable_sort(positions.begin(), positions.end(),
                     [&](std::size_t a, std::size_t b) { return dropped[a] > dropped[b]; });
    for (std::size_t i = 0; i < count - assigned; ++i) ++by_position[positions[i]];

    const std::vector<int> order = popularity_order(nranks, skew.seed);
    std::vector<std::size_t> counts(n);
    for (std::size_t p = 0; p < n; ++p) counts[static_cast<std::size_t>(order[p])] = by_position[p];
    return counts;
}

}  // namespace parbench

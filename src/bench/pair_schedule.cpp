#include "bench/pair_schedule.hpp"

#include <algorithm>

namespace parbench {

// Circle method: fix seat 0, rotate the others by one seat per round; seat i meets seat
// slots-1-i. With an odd n one seat is a bye (index n), which drops that pair.
std::vector<std::vector<std::pair<int, int>>> round_robin_rounds(int n) {
    std::vector<std::vector<std::pair<int, int>>> rounds;
    if (n < 2) return rounds;
    const int slots = n % 2 == 0 ? n : n + 1;
    std::vector<int> seats(static_cast<std::size_t>(slots));
    for (int i = 0; i < slots; ++i) seats[static_cast<std::size_t>(i)] = i;
    for (int round = 0; round < slots - 1; ++round) {
        std::vector<std::pair<int, int>> pairs;
        for (int i = 0; i < slots / 2; ++i) {
            const int a = seats[static_cast<std::size_t>(i)];
            const int b = seats[static_cast<std::size_t>(slots - 1 - i)];
            if (a < n && b < n) pairs.emplace_back(std::min(a, b), std::max(a, b));
        }
        rounds.push_back(std::move(pairs));
        std::rotate(seats.begin() + 1, seats.end() - 1, seats.end());
    }
    return rounds;
}

}  // namespace parbench

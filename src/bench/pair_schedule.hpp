// The rounds of an all-pairs measurement: a round-robin tournament (the circle method), so
// every rank is in at most one pair per round and a round's pairs run at once without
// sharing an endpoint. n participants need n-1 rounds when n is even and n when n is odd
// (each participant then sits one round out), instead of the n(n-1)/2 of one pair at a time.
#pragma once

#include <utility>
#include <vector>

namespace parbench {

// rounds[r] = the pairs (a, b), a < b, of indices 0..n-1 that meet in round r.
std::vector<std::vector<std::pair<int, int>>> round_robin_rounds(int n);

}  // namespace parbench

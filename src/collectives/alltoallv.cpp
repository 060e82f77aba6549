// alltoall with blocks of uneven size: rank s sends block d of its buffer to rank d, the
// sizes drawn by --skew (collectives/skew.hpp), the same on every rank. `count` is each
// rank's send buffer, as alltoall's; what a rank receives depends on how popular it is.
// --direction combine runs the transpose (collectives/skew.hpp ExchangeDirection): rank d sends
// each rank back its block d, so `count` is then what every rank receives, and what a rank sends
// depends on how popular it is.
#include <numeric>

#include "collectives/units.hpp"

namespace parbench {
namespace {

// Where each block starts in a buffer of consecutive blocks.
std::vector<std::size_t> block_starts(const std::vector<std::size_t>& blocks) {
    std::vector<std::size_t> starts(blocks.size(), 0);
    std::exclusive_scan(blocks.begin(), blocks.end(), starts.begin(), std::size_t{0});
    return starts;
}

// The elements this rank exchanges with each rank: the dispatch sends block d to rank d and
// receives its own block from every rank (every rank routes alike); the combine swaps the two.
struct Exchange {
    std::vector<std::size_t> send_counts, recv_counts;
};

Exchange exchange_of(std::size_t count, int nranks, int rank, const CollectiveParams& params) {
    const std::vector<std::size_t> blocks = destination_counts(count, nranks, params.skew);
    const std::vector<std::size_t> mine(static_cast<std::size_t>(nranks), blocks[static_cast<std::size_t>(rank)]);
    if (params.direction == ExchangeDirection::combine) return {mine, blocks};
    return {blocks, mine};
}

std::size_t total(const std::vector<std::size_t>& counts) {
    return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

}  // namespace

std::size_t Alltoallv::count_multiple(int) const { return 1; }

BufferShape Alltoallv::shape(std::size_t count, int nranks, int rank, const CollectiveParams& params) const {
    const Exchange exchange = exchange_of(count, nranks, rank, params);
    return {total(exchange.send_counts), total(exchange.recv_counts), 0, 0, 0};
}

void Alltoallv::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                    const CollectiveParams& params) const {
    const Exchange exchange = exchange_of(count, comm.size(), comm.rank(), params);
    comm.alltoallv(send, exchange.send_counts, block_starts(exchange.send_counts), recv, exchange.recv_counts,
                   block_starts(exchange.recv_counts), params.type);
}

// Dispatch: block q of the output is rank q's block for this rank, its elements from this
// rank's block start on (the same start on every source, since every rank routes alike).
// Combine: the output's run q (block q's size) is what rank q sends this rank, the run of its
// send buffer from this rank x block q on; runs differ in size, so expected_segments gives them.
std::optional<ExpectedLayout> Alltoallv::expected(std::size_t count, int nranks, int rank,
                                                  const CollectiveParams& params, const InputPattern& pattern) const {
    if (params.direction == ExchangeDirection::combine) return std::nullopt;  // runs of uneven size
    const std::vector<std::size_t> blocks = destination_counts(count, nranks, params.skew);
    const auto mine = static_cast<std::size_t>(rank);
    if (blocks[mine] == 0) return std::nullopt;  // this rank receives nothing
    return blocks_from_every_rank(pattern, blocks[mine], block_starts(blocks)[mine]);
}

std::vector<ExpectedSegment> Alltoallv::expected_segments(std::size_t count, int nranks, int rank,
                                                          const CollectiveParams& params, const InputPattern& pattern,
                                                          std::size_t result_count) const {
    if (params.direction == ExchangeDirection::dispatch)
        return Collective::expected_segments(count, nranks, rank, params, pattern, result_count);
    const std::vector<std::size_t> blocks = destination_counts(count, nranks, params.skew);
    const std::vector<std::size_t> starts = block_starts(blocks);
    std::vector<ExpectedSegment> segments;
    for (std::size_t source = 0; source < blocks.size(); ++source) {
        if (blocks[source] == 0) continue;
        ExpectedSegment segment;
        segment.offset = starts[source];
        segment.count = blocks[source];
        segment.layout.pattern = pattern;
        segment.layout.fixed_source_rank = static_cast<int>(source);
        segment.layout.index_offset = static_cast<std::size_t>(rank) * blocks[source];
        segments.push_back(segment);
    }
    return segments;
}

std::optional<RankTraffic> Alltoallv::rank_traffic(std::size_t count, int nranks,
                                                   const CollectiveParams& params) const {
    RankTraffic traffic;
    for (int rank = 0; rank < nranks; ++rank) {
        const Exchange exchange = exchange_of(count, nranks, rank, params);
        traffic.sent.push_back(total(exchange.send_counts));
        traffic.received.push_back(total(exchange.recv_counts));
    }
    return traffic;
}

}  // namespace parbench

// alltoall with blocks of uneven size: rank s sends block d of its buffer to rank d, the
// sizes drawn by --skew (collectives/skew.hpp), the same on every rank. `count` is each
// rank's send buffer, as alltoall's; what a rank receives depends on how popular it is.
#include <numeric>

#include "collectives/units.hpp"

namespace parbench {
namespace {

// Where each destination's block starts in a rank's send buffer.
std::vector<std::size_t> block_starts(const std::vector<std::size_t>& blocks) {
    std::vector<std::size_t> starts(blocks.size(), 0);
    std::exclusive_scan(blocks.begin(), blocks.end(), starts.begin(), std::size_t{0});
    return starts;
}

}  // namespace

std::size_t Alltoallv::count_multiple(int) const { return 1; }

// nccl-tests' alltoall factor: on average each rank sends (n-1)/n of its buffer away and
// receives as much. Under skew the slowest receiver sets the time, so the same bytes over
// a longer time show as a lower busbw: the cost of the imbalance.
double Alltoallv::bus_factor(int nranks) const { return static_cast<double>(nranks - 1) / nranks; }

// Every rank sends `count`; this rank receives its block from each of the n ranks.
BufferShape Alltoallv::shape(std::size_t count, int nranks, int rank, const CollectiveParams& params) const {
    const std::vector<std::size_t> blocks = destination_counts(count, nranks, params.skew);
    const std::size_t received = blocks[static_cast<std::size_t>(rank)] * static_cast<std::size_t>(nranks);
    return {count, received, 0, 0, 0};
}

void Alltoallv::run(Communicator& comm, const void* send, void* recv, std::size_t count,
                    const CollectiveParams& params) const {
    const int nranks = comm.size();
    const std::vector<std::size_t> send_counts = destination_counts(count, nranks, params.skew);
    const std::vector<std::size_t> send_starts = block_starts(send_counts);
    // Every rank routes alike, so what each source sends here is this rank's block.
    const std::vector<std::size_t> recv_counts(static_cast<std::size_t>(nranks),
                                               send_counts[static_cast<std::size_t>(comm.rank())]);
    const std::vector<std::size_t> recv_starts = block_starts(recv_counts);
    comm.alltoallv(send, send_counts, send_starts, recv, recv_counts, recv_starts, params.type);
}

// Block q of the output is rank q's block for this rank: its elements from this rank's
// block start on (the same start on every source, since every rank routes alike).
std::optional<ExpectedLayout> Alltoallv::expected(std::size_t count, int nranks, int rank,
                                                  const CollectiveParams& params, const InputPattern& pattern) const {
    const std::vector<std::size_t> blocks = destination_counts(count, nranks, params.skew);
    const auto mine = static_cast<std::size_t>(rank);
    if (blocks[mine] == 0) return std::nullopt;  // this rank receives nothing
    return blocks_from_every_rank(pattern, blocks[mine], block_starts(blocks)[mine]);
}

std::optional<RankTraffic> Alltoallv::rank_traffic(std::size_t count, int nranks,
                                                   const CollectiveParams& params) const {
    const std::vector<std::size_t> blocks = destination_counts(count, nranks, params.skew);
    RankTraffic traffic;
    traffic.sent.assign(blocks.size(), count);
    for (std::size_t block : blocks) traffic.received.push_back(block * static_cast<std::size_t>(nranks));
    return traffic;
}

}  // namespace parbench

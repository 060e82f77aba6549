// Mixture-of-experts dispatch and combine measured the way NCCL's ep_bench and DeepEP measure
// them, not as a bare alltoallv: every rank routes its tokens to top-k experts, sends each token
// once to every rank holding one of its experts (dispatch), runs a stand-in expert there, and the
// experts' weighted outputs come back and are summed per token (combine). Dispatch and combine are
// timed apart.
//
// Routing: expert e lives on rank e / (experts / ranks). Token t of rank r picks k distinct
// experts, drawn without replacement from the experts' popularity (--skew over experts:
// collectives/skew.hpp destination_weights, the same uniform|zipf:S|hot:K as alltoallv) with
// counter-based uniforms of (seed, r x tokens + t, choice), so every rank knows every rank's
// routing and no index travels with the data (DeepEP sends topk_idx beside the tokens; these
// bytes are left out, as ep_bench's count leaves them out). An optional capacity keeps the first
// ceil(capacity x ranks x tokens x k / experts) selections of each expert, in (rank, token,
// choice) order, and drops the rest.
//
// Data: token values are small integers ((7 r + 13 t + 3 h) mod 13 - 6), expert e scales by
// (e mod 3) + 1 (the identity) or multiplies by that times the identity matrix (cblas_sgemm, the
// GEMM stand-in), and gating weights are 1, so a combined token is exactly sum over its kept
// experts of the scale times the token: every value below 256 in magnitude for k <= 14, exact in
// bfloat16, float16 and float32. The check compares every element of every rank's combined
// tokens with that sum.
//
// Timing, per iteration and phase (the harness's method): barrier, start, phase, stop, each
// rank's own time; a sample is the slowest rank's. Dispatch: packing the send rows (converted to
// the dispatch type) and the alltoallv. Combine: the alltoallv back (in the combine type) and the
// sum per token. The expert runs between them, timed apart and reported beside.
//
// Bytes, per rank and phase, two ways:
//   moved:    rows actually sent and received (one per token and destination rank), split by
//             whether the peer rank is on this rank's host (intra-host) or not (inter-host);
//   ep_bench: ep_bench's convention (contrib nccl_ep ep_bench.cu, calculateHighThroughputBytes):
//             sent = unique (token, destination host) pairs, received = unique (source rank, token)
//             pairs with an expert on this rank; inter-host = the remote hosts' share.
// Bandwidth = bytes / the rank's own median time of the phase, per rank, then mean, min and max
// over ranks (with the ranks), as ep_bench reports its per-rank throughput.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/rank_times.hpp"
#include "collectives/skew.hpp"
#include "comm/communicator.hpp"
#include "core/dtype.hpp"

namespace parbench {

struct MoeDispatchConfig {
    int tokens = 512;  // per rank
    int hidden = 2048;
    int topk = 4;
    int experts = 32;
    Skew skew;
    DType dispatch_type = DType::bfloat16;
    DType combine_type = DType::bfloat16;
    std::optional<double> capacity;  // capacity factor; none: no token dropped
    bool gemm_expert = false;        // the stand-in expert: identity scale (false) or a GEMM
    int warmup = 5;
    int iters = 20;
    bool check = true;
};

inline constexpr int moe_max_topk = 14;  // keeps every combined value below 256 (exact in bfloat16)

// UsageError naming the flag when the configuration cannot run on `ranks` ranks (experts not a
// multiple of the ranks, k above the experts, a type that is not a float type, ...).
void check_moe_config(const MoeDispatchConfig& config, int ranks);

// Every rank's routing: expert of (rank, token, choice), -1 when the capacity dropped it.
struct MoeRouting {
    int ranks = 0;
    int tokens = 0;
    int topk = 0;
    int experts_per_rank = 0;
    std::vector<int> expert;  // (ranks, tokens, topk)
    std::size_t dropped = 0;
    int at(int rank, int token, int choice) const {
        return expert[(static_cast<std::size_t>(rank) * tokens + token) * topk + choice];
    }
    int rank_of_expert(int e) const { return e / experts_per_rank; }
    // Whether token t of rank r goes to rank d (one of its kept experts lives there).
    bool sends(int r, int t, int d) const;
};
MoeRouting route_moe_tokens(const MoeDispatchConfig& config, int ranks);

// One phase's byte counts for one rank.
struct MoePhaseBytes {
    std::uint64_t sent_intra = 0, sent_inter = 0;
    std::uint64_t received_intra = 0, received_inter = 0;
    std::uint64_t ep_sent = 0, ep_sent_inter = 0;          // ep_bench's unique (token, host) pairs
    std::uint64_t ep_received = 0, ep_received_inter = 0;  // ep_bench's unique (source rank, token) pairs
};
// Rank `rank`'s dispatch bytes (rows x hidden x element); the combine's are the transpose.
MoePhaseBytes moe_dispatch_bytes(const MoeRouting& routing, int rank, const std::vector<std::string>& hosts_by_rank,
                                 std::size_t row_bytes);

struct MoeMeasurement {
    RankTimes dispatch;
    RankTimes combine;
    std::vector<double> expert_us;  // per rank, median
    std::optional<std::uint64_t> wrong;
};

// Collective over `comm` (MPI, host memory). `control` carries the bookkeeping.
MoeMeasurement measure_moe_dispatch(const MoeDispatchConfig& config, const MoeRouting& routing, Communicator& comm,
                                    Communicator& control);

}  // namespace parbench

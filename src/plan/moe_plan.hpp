// plan for mixture-of-experts models with expert parallelism (--ep), in Megatron-core's layout:
// the ep ranks of an expert-parallel group are carved from the dp x cp ranks (the expert rank
// order tp, ep, dp, pp, cp folded into dp: a group's members are tp apart;
// theory/expert_parallel.hpp), each holds E/ep of every MoE layer's
// routed experts (split over tp as well: the experts' tensor parallelism is tp), and the ranks
// holding the same experts, dp x cp / ep of them, form the expert-data-parallel group over which
// the experts' gradients are reduced and ZeRO shards their states. Router, shared experts,
// attention, norms, embedding and output are dense parameters, replicated over ep and sharded
// by ZeRO over dp x cp as before.
//
// The dense formulas run on the model's dense skeleton (theory/moe_work.hpp); this file turns
// the skeleton's prediction into the MoE model's: states split into dense and expert parts,
// the MoE layers' activations, the experts' gradient traffic over their own group, and the
// all-to-all of every MoE layer (dispatch and combine, forward and backward:
// theory/moe.hpp's moe_alltoall_bytes, timed as an alltoall of the busiest receiver's buffer on
// the ep group's link, intra-host when ep x tp x cp GPUs fit in a host, else across hosts).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "plan/alpha_beta.hpp"
#include "theory/model_config.hpp"
#include "theory/model_layout.hpp"

namespace parbench {

struct PlanLayout;
struct PlanMemory;
struct PlanPrediction;
struct PlanContext;
struct Layout;
struct ExchangeStretches;

// A model with "moe" (or "mla") in plan: under the frameworks' conventions engine.model (the
// layout's, theory/layout.hpp) is its dense skeleton and `model` the config; the degrees (ep,
// etp) and the MoE options are the layout's.
struct PlanExperts {
    std::optional<ModelConfig> model;  // nullopt: a dense model
    // --moe-imbalance: max / mean tokens received per ep rank, what `parbench alltoallv --skew`
    // reports as its imbalance; the busiest rank sets the all-to-all's and the experts' time.
    double imbalance = 1.0;
    bool active() const { return model.has_value(); }
    bool has_experts() const { return model && model->moe.has_value(); }
    // A rank receives at most every copy, so max / mean is at most ep (1 with one rank).
    double effective_imbalance(int ep) const { return std::min(imbalance, static_cast<double>(ep)); }
};

struct MoePrediction {
    bool active = false;
    int ep = 1, etp = 1, expert_dp = 1;
    double imbalance = 1.0;       // as used (at most ep)
    double total_parameters = 0, active_parameters = 0;
    double dense_parameters_rank = 0, expert_parameters_rank = 0;  // on the memory's rank, tp shard
    int moe_layers_rank = 0;      // MoE layers on the pipeline rank with the most
    double alltoall_calls = 0, alltoall_bytes = 0, alltoall_ms = 0;  // per step, bytes leaving the rank
    Placement ep_placement = Placement::intra_host;
    // --moe-a2a-overlap-1f1b, per pipeline rank: the paired groups of a step, and the exposed
    // all-to-all of a step with the pairs and without (every exchange waited for); `exchange_ms`
    // one dispatch or combine (either direction), `counts_ms` one row-count alltoall (parbench's
    // engine; blocking, always exposed).
    bool a2a_overlap_1f1b = false;
    double exchange_ms = 0, counts_ms = 0;
    std::vector<int> paired_groups_by_pp_rank;
    std::vector<double> paired_exposed_ms_by_pp_rank, blocking_exposed_ms_by_pp_rank;
};

// The ranges of layers pipeline rank `pp_rank` holds (all layers without a pipeline).
std::vector<LayerRange> pipeline_rank_layers(const Layout& layout, int pp_rank);

struct MoeRankParameters {
    double dense = 0, routed = 0;  // one tensor-parallel rank's, after the ep split for routed
    int layers = 0, moe_layers = 0;
};
// `skeleton_parameters`: the engine layout's parameters on this rank (its tp shard): the dense
// skeleton's under the frameworks' conventions, the MoE model's own under --states parbench.
MoeRankParameters moe_rank_parameters(const PlanLayout& layout, double skeleton_parameters,
                                      const std::vector<LayerRange>& layers);
int expert_data_parallel(const PlanLayout& layout);

// Replaces the skeleton's states by the dense and expert states, and adds the MoE layers'
// activations beyond the skeleton's dense MLP; `layer_micro` is the layers x micro-batches in
// flight that the skeleton's activations were counted for.
void apply_moe_memory(PlanMemory& memory, const PlanLayout& layout, double skeleton_parameters, double layer_micro);

struct MoeLinks {
    Placement dp = Placement::intra_host, edp = Placement::intra_host, ep = Placement::intra_host;
    double dp_nics = 1, edp_nics = 1;  // NICs a cross-host group's members on one host drive
};
// Splits the dp lines (the skeleton's gradients) into dense and expert parts, each on its own
// group, adds the ep all-to-all line, and fills out.moe and out.exposed_ep_ms.
void apply_moe_traffic(PlanPrediction& out, const PlanContext& context, double skeleton_parameters,
                       const MoeLinks& links);

// The layouts of --search with every expert-parallel degree that divides the experts and the
// dp ranks (FSDP's hybrid sharding variants dropped: its replicas are not modelled for experts;
// tp > 1 without sp dropped: Megatron-core requires sequence parallelism for MoE under tp).
std::vector<PlanLayout> with_expert_degrees(const std::vector<PlanLayout>& layouts);
// The layouts of --search, each MoE 1F1B layout that takes --moe-a2a-overlap-1f1b
// (theory/moe_a2a_overlap_1f1b.hpp) followed by its paired variant: both ranked by step time.
std::vector<PlanLayout> with_a2a_overlap_1f1b(const std::vector<PlanLayout>& layouts);

// What plan approximates for MoE models, for its output and JSON.
std::string moe_approximations(const ModelConfig& config, bool a2a_overlap = false, bool a2a_overlap_1f1b = false);

// The exposed part of a step's ep all-to-all under --moe-a2a-overlap: `blocking_ms` (the counts'
// alltoall) stays exposed; of `overlappable_ms` (the dispatch and combine) the first dispatch
// half and the last combine half of every pass wait with nothing to overlap, and the other
// half is hidden up to `compute_ms`, the step's compute (an upper bound: in train it overlaps
// the MoE layers' expert GEMMs only).
double moe_overlapped_exposure(double blocking_ms, double overlappable_ms, double compute_ms);

// --moe-a2a-overlap-1f1b: the all-to-all left exposed by one paired group, F(j) and B(i) on two
// fibers of one thread (core/fiber_pair.hpp) that alternate at every exchange either posts: F runs
// its first stretch and posts, B runs its first and posts, F waits for its exchange and runs its
// next stretch, and so on (`stretches`: plan/stage_compute.hpp's, 2n + 1 each way for n MoE
// layers). An exchange takes `exchange_ms` from its post and progresses on its own (a transport
// that needs no host calls: NCCL, a NIC; not Open MPI's shared memory, which moves it only
// inside MPI calls), so each exchange's exposed part is max(0, exchange_ms - what the partner
// ran since the post: its compute stretch and its own wait). Exchanges in flight together are
// assumed not to slow each other.
double moe_paired_group_exposed_ms(const ExchangeStretches& stretches, double exchange_ms);

// A pipeline rank's exposed all-to-all over a step of `microbatches` under the pairing:
// `paired_groups` groups at `paired_group_ms` (moe_paired_group_exposed_ms), every other forward
// and backward waiting for its 2 exchanges per MoE layer, and the counts' alltoall (`counts_ms`,
// one per MoE layer and forward) blocking everywhere.
double moe_rank_exposed_ms(int microbatches, int paired_groups, int moe_layers, double exchange_ms, double counts_ms,
                           double paired_group_ms);

// Prices --moe-a2a-overlap-1f1b on a prediction whose ep lines are in (apply_moe_traffic): fills
// out.moe's paired fields and sets out.exposed_ep_ms to the most exposed pipeline rank's (the
// step waits for its slowest stage); returns the all-to-all time the pairs hid on that rank.
// `stretches` per pipeline rank (moe_exchange_stretches), `paired_groups` per rank
// (paired_groups_per_rank).
double apply_moe_a2a_overlap_1f1b(PlanPrediction& out, const std::vector<ExchangeStretches>& stretches,
                                  const std::vector<int>& paired_groups);

nlohmann::json to_json(const MoePrediction& moe);

}  // namespace parbench

#pragma once

// predict_layout's traffic stage: every pipeline rank's traffic, by the formula train checks its
// counters against (theory/rank_traffic.hpp), priced into the prediction's comm lines on the
// cluster's links under the layout's schemes and byte convention (plan/state_rules.hpp).

#include <cstddef>
#include <optional>

#include "plan/layout_plan.hpp"

namespace parbench {

// Fills out.traffic_by_pp_rank and out.comm (and the MoE lines, plan/moe_plan.hpp) for the rank
// of out.memory.pp_rank; returns the index of DeepSpeed's re-gather line in out.comm, if one is
// added.
// Megatron-core's buckets: its default bucket_size, max(40e6, 1e6 x dp) parameters
// (distributed_data_parallel.py, DistributedDataParallel.__init__, the same at the README's
// scaling commit f2e5db40), over the rank's `parameters`; at least one.
double megatron_ddp_buckets(double parameters, int dp);

// The distributed optimizer's parameter all-gather under --overlap-param-gather, as Megatron-core
// runs it (distributed_data_parallel.py's forward pre-hooks; param_and_grad_buffer.py,
// finish_param_sync; at f2e5db40 distrib_optimizer.py, _finish_param_sync_helper): after the
// step the first bucket's gather is dispatched and waited for by its first module's forward, and
// each bucket's wait dispatches the next bucket's gather (one at a time, so that communication
// kernels do not hold up the compute kernels queued behind them), so bucket i+1's gather runs
// behind bucket i's share of the next step's first micro-batch forward (`first_forward_ms`) and
// no other compute. `gather_ms` over
// `buckets` equal buckets: g + (buckets - 1) max(0, g - f), g and f per bucket. Megatron buckets
// the first pipeline stage only (the others' data-parallel communication is off the critical
// path, its comment says); plan prices the dp lines of the rank it sizes, with its buckets.
double megatron_param_gather_exposed_ms(double gather_ms, double buckets, double first_forward_ms);

std::optional<std::size_t> predict_comm(PlanPrediction& out, const PlanLayout& p, const PlanContext& context,
                                        const ParameterLayout& whole, const EngineRank& rank);

}  // namespace parbench

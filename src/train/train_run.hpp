// One training run on a mesh: build the model and the scheme, initialise, run warm-up and
// timed steps, and bring every rank's measurements together. Also the serial reference that
// --check compares against, and the comparison itself.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/thread_counters.hpp"
#include "comm/communicator.hpp"
#include "device/device.hpp"
#include "theory/parameter_layout.hpp"
#include "theory/pipeline/partition.hpp"
#include "theory/traffic.hpp"
#include "train/matmuls.hpp"
#include "train/memory_ledger.hpp"
#include "train/moe/routing_trace.hpp"
#include "train/mesh.hpp"
#include "train/ops/ops.hpp"
#include "train/pipeline/pipeline_executor.hpp"
#include "train/reference_check.hpp"
#include "train/train_options.hpp"

namespace parbench {

// Pipeline runs: per world rank, means over the timed steps, and the step spans the bubble is
// measured against (the time from each step's start to the last rank's last pipeline action).
struct PipelineMeasurements {
    std::vector<double> span_ms;            // per timed step, max over ranks
    std::vector<int> stage_of_rank;         // pipeline coordinate of each world rank
    std::vector<double> compute_ms;         // per rank, per step: F + B + W
    std::vector<double> recv_wait_ms;       // per rank, per step
    std::vector<double> send_ms;            // per rank, per step
    std::vector<double> p2p_bytes;          // per rank, per step, sent
    std::vector<double> peer_wait_ms;       // per rank, per step: PipelineStepStats::peer_wait_ms
    std::vector<std::vector<int>> in_flight;  // per pipeline rank, per chunk: the schedule's peak
    std::vector<ActivationPool> kept_pools;   // per pipeline rank: what its model allocated (partition.hpp)
    std::vector<std::vector<TimelineEvent>> events;  // rank 0, per world rank, when traced (gathered after each step)
};

// Context-parallel runs: per world rank, means per timed step of its ContextAttention's
// counters (train/context/context_attention.hpp), summed over its layers and micro-batches.
struct ContextMeasurements {
    std::vector<int> cp_rank;        // each world rank's coordinate in its cp group
    std::vector<double> compute_ms;  // attention math, forward and backward
    std::vector<double> wait_ms;     // blocked on the group's transfers (exposed cp communication)
    std::vector<double> bytes_sent;
    std::vector<double> messages;    // point-to-point sends (ring) or all-to-all calls
    std::vector<double> score_elements;  // attention scores computed: the work, whatever the speed
    std::size_t saved_floats = 0;        // per layer and micro-batch (ContextAttention::saved_floats), max over ranks
    std::size_t workspace_bytes = 0;     // taken from the ledger at construction, max over ranks
    // Whether every rank's bytes sent and messages equal theory/context_parallel.hpp's counts.
    bool counters_match_all_ranks = false;
};

// One finished step as every rank sees it (after a small all-reduce outside the timed region).
struct StepProgress {
    int step = 0;         // counts from 0 over warm-up and timed steps
    int total_steps = 0;  // warm-up + timed
    bool timed = false;
    double time_ms = 0.0;  // max over ranks
    double loss = 0.0;     // the global batch's mean
    double grad_norm = 0.0;  // the L2 norm of the whole model's gradients this step (before the update)
    std::size_t peak_memory_bytes = 0;  // the memory ledger's peak so far, max over ranks
};

// Told about every step as it starts and ends, on every rank (the CLI prints the progress
// line, rewrites the report and feeds the watchdog from it). Must not communicate.
class StepObserver {
  public:
    virtual ~StepObserver() = default;
    virtual void step_starting(int /*step*/, bool /*timed*/) {}
    virtual void step_finished(const StepProgress& /*progress*/) {}
    virtual void gathering_results() {}  // after the last step: the collectives that gather results
    // What to tell of every call on the step's communicators (each dimension's group of more
    // than one rank, as "dp", "tp", "pp", and the world's bookkeeping as "world"), or null.
    // Called from the step's thread, around each call: the --timeout watchdog names from it
    // the call each rank waits in.
    virtual CallObserver* call_observer() { return nullptr; }
    // With --trace, on world rank 0 after each timed step (outside its timing, before
    // step_finished): every rank's timeline events of that step, by world rank. What a run that
    // fails or hangs later has of its trace.
    virtual void timeline_gathered(const std::vector<std::vector<TimelineEvent>>& /*step_events_by_rank*/) {}
};

// One MoE layer's figures per timed step (means over the timed steps). Routing figures count
// the global batch (every data-parallel rank's groups, once per tp group); times and bytes are
// the max over ranks of each rank's all-to-alls (its expert-parallel group's calls; the calls
// block, so all of their time is exposed).
struct MoeLayerMeasurement {
    int layer = 0;
    std::vector<double> tokens_per_expert;  // kept assignments per expert
    double routed = 0.0;                    // assignments chosen
    double dropped = 0.0;                   // of them dropped by the capacity
    double aux_loss = 0.0;                  // L_aux, mean over the step's routing groups
    double dispatch_ms = 0.0, combine_ms = 0.0, counts_ms = 0.0;
    double dispatch_exposed_ms = 0.0, combine_exposed_ms = 0.0;  // the host's time blocked in them
    double dispatch_bytes = 0.0, combine_bytes = 0.0;
};
struct MoeMeasurements {
    std::vector<MoeLayerMeasurement> layers;  // in layer order
    // What one MoE layer keeps per micro-batch, and the MoE scratch, as the ledger counted
    // them (max over ranks), beside theory/moe_memory.hpp's formulas for this rank's shape.
    std::size_t kept_bytes_measured = 0, kept_bytes_formula = 0;
    std::size_t scratch_bytes_measured = 0, scratch_bytes_formula = 0;
    std::size_t dispatch_buffer_bytes_formula = 0;
};

struct TrainMeasurements {
    std::size_t parameters = 0;          // the whole model
    std::size_t parameters_per_rank = 0; // this rank's shard under tensor parallelism (max over ranks)
    std::vector<double> step_ms;         // timed steps, max over ranks
    std::vector<double> exposed_comm_ms; // timed steps, max over ranks of the sum over dimensions
    std::vector<double> loss;            // every step (warm-up first), mean over data-parallel ranks
    std::vector<MemoryUsage> memory_by_rank;
    // By dimension ("dp", "tp", "pp"; with --cp "dp_cp" in place of "dp", and "cp"; groups of
    // more than one rank only): this rank's group's calls over the timed steps, and per timed
    // step the max over ranks of each rank's comm and exposed time in that dimension (StepRecord).
    std::map<std::string, CommStats> comm;
    std::map<std::string, std::vector<double>> comm_ms;
    std::map<std::string, std::vector<double>> exposed_ms;
    // This rank's expected traffic by dimension (train/expected_traffic.hpp), and whether every
    // rank's measured traffic equals its own expected in that dimension.
    std::map<std::string, TrafficByOp> expected_traffic;
    std::uint64_t calls_on_groups_of_one = 0;  // over every rank and timed step: 0, as they issue nothing
    std::map<std::string, bool> expected_matches_all_ranks;
    std::vector<std::vector<double>> compute_ms_by_rank;  // per rank, per timed step: StepRecord::compute_ms
    // Per world rank: its pipeline coordinate, and the compute passes it ran per timed step
    // (StepRecord::passes, the mean over the timed steps: a whole number when every step ran the
    // same passes, as the schedule says they do).
    std::vector<int> pp_rank_of_rank;
    std::vector<std::array<double, 4>> passes_by_rank;  // forward, input_grad, weight_grad, weight_grad_deferred
    std::vector<std::string> host_of_rank;
    // Every rank's timing-thread page faults and involuntary switches summed over the timed
    // steps, each read just outside run_step (bench/thread_counters.hpp).
    std::vector<ThreadCounters> counters_by_rank;
    std::size_t activation_bytes_per_layer = 0;  // Model::activation_bytes_per_layer, max over ranks
    std::vector<float> final_parameters; // canonical order; filled on rank 0 when asked
    std::optional<PipelineMeasurements> pipeline;  // --pp > 1
    std::optional<ContextMeasurements> context;    // --cp > 1
    std::optional<MoeMeasurements> moe;            // a model with MoE layers
    // The step whose loss was NaN or infinite: training stopped after it, alike on every rank,
    // and the per-step figures above cover only the steps before it.
    std::optional<StepProgress> diverged;
    // --check of an MoE model (keep_parameters): the routing every group decided, on rank 0, or
    // why the run could not record it (train/moe/routing_trace.hpp).
    std::optional<RoutingTrace> routing;
    std::string routing_not_recorded;
};

// Collective over `control` (the mesh's world). `keep_parameters` gathers the final
// parameters to rank 0 (for --check), and an MoE model's routing. `follow_routing`: the MoE
// layers take these decisions instead of their own (the serial reference of --check).
TrainMeasurements run_training(const TrainPlan& plan, Mesh& mesh, Device& device, Ops& ops, Communicator& control,
                               bool keep_parameters, StepObserver* observer = nullptr,
                               RoutingTrace* follow_routing = nullptr);

// The serial reference of --check: the same model, seed, data, global batch and steps on a
// world of one, plain data parallelism with one micro-batch, in the same precision (a bf16
// run is compared with a bf16 reference: the same numerics, only the summation order differs).
// A model with MoE layers is run in micro-batches of one rank's size (`dp`: the run's
// data-parallel degree), so that its routing groups are the run's.
TrainPlan serial_reference_plan(const TrainPlan& plan, int dp);

// What --check allows a run of `plan` (train/reference_check.hpp): its precision's tolerances and
// Adam's bound on its elements of zero gradient over all its steps.
CheckTolerances check_tolerances(const TrainPlan& plan);

// --check on rank 0, after `measurements` of `plan` (run with keep_parameters on `dp` data-parallel
// ranks): runs the serial reference on `serial_mesh` (a world of one, `self`), following the run's
// MoE routing where it was recorded, and compares.
CheckResult check_against_serial_reference(const TrainPlan& plan, int dp, const TrainMeasurements& measurements,
                                           Mesh& serial_mesh, Device& device, Ops& ops, Communicator& self,
                                           StepObserver* observer);
}  // namespace parbench

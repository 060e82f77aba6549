#include "train/train_run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>

#include <unistd.h>

#include "core/nvtx.hpp"
#include "theory/context_parallel.hpp"
#include "theory/expert_parallel.hpp"
#include "theory/moe_memory.hpp"
#include "theory/pipeline/partition.hpp"
#include "train/expected_traffic.hpp"
#include "train/model.hpp"
#include "train/schemes/scheme.hpp"
#include "train/step_driver.hpp"

namespace parbench {
namespace {

std::vector<MemoryUsage> gather_memory(const MemoryUsage& mine, Communicator& control) {
    constexpr std::size_t fields = 2 * memory_category_count + 2;
    std::vector<std::uint64_t> local;
    for (std::size_t c = 0; c < memory_category_count; ++c) local.push_back(mine.live[c]);
    for (std::size_t c = 0; c < memory_category_count; ++c) local.push_back(mine.peak[c]);
    local.push_back(mine.total_live);
    local.push_back(mine.total_peak);
    std::vector<std::uint64_t> all(fields * static_cast<std::size_t>(control.size()));
    control.allgather(local.data(), all.data(), fields, DType::uint64);
    std::vector<MemoryUsage> usages;
    for (int r = 0; r < control.size(); ++r) {
        const std::uint64_t* row = all.data() + fields * static_cast<std::size_t>(r);
        MemoryUsage usage;
        for (std::size_t c = 0; c < memory_category_count; ++c) {
            usage.live[c] = row[c];
            usage.peak[c] = row[memory_category_count + c];
        }
        usage.total_live = row[2 * memory_category_count];
        usage.total_peak = row[2 * memory_category_count + 1];
        usages.push_back(usage);
    }
    return usages;
}

// Rank 0 receives every rank's timeline events from `first` on (7 numbers each) over `control`.
std::vector<std::vector<TimelineEvent>> gather_events(const std::vector<TimelineEvent>& events, std::size_t first,
                                                      Communicator& control) {
    constexpr std::size_t fields = 7;
    const std::vector<TimelineEvent> mine(events.begin() + static_cast<std::ptrdiff_t>(first), events.end());
    std::vector<double> packed;
    for (const TimelineEvent& e : mine)
        packed.insert(packed.end(), {static_cast<double>(e.kind), e.start_us, e.duration_us,
                                     static_cast<double>(e.microbatch), static_cast<double>(e.stage),
                                     static_cast<double>(e.step), 0.0});
    std::vector<std::vector<TimelineEvent>> all;
    if (control.rank() != 0) {
        std::uint64_t count = packed.size();
        control.send(&count, 1, DType::uint64, 0);
        if (count > 0) control.send(packed.data(), packed.size(), DType::float64, 0);
        return all;
    }
    all.push_back(mine);
    for (int rank = 1; rank < control.size(); ++rank) {
        std::uint64_t count = 0;
        control.recv(&count, 1, DType::uint64, rank);
        std::vector<double> theirs(count);
        if (count > 0) control.recv(theirs.data(), count, DType::float64, rank);
        std::vector<TimelineEvent> events;
        for (std::size_t i = 0; i + fields <= theirs.size(); i += fields)
            events.push_back(TimelineEvent{static_cast<TimelineKind>(static_cast<int>(theirs[i])), theirs[i + 1],
                                           theirs[i + 2], static_cast<int>(theirs[i + 3]),
                                           static_cast<int>(theirs[i + 4]), static_cast<int>(theirs[i + 5])});
        all.push_back(std::move(events));
    }
    return all;
}

// Every rank's host name, in world-rank order.
std::vector<std::string> gather_host_names(Communicator& control) {
    constexpr std::size_t width = 256;
    std::vector<char> mine(width, '\0');
    if (gethostname(mine.data(), width - 1) != 0) throw std::runtime_error("gethostname failed");
    std::vector<char> all(width * static_cast<std::size_t>(control.size()));
    control.allgather(mine.data(), all.data(), width, DType::int8);
    std::vector<std::string> hosts;
    for (int r = 0; r < control.size(); ++r) hosts.emplace_back(all.data() + width * static_cast<std::size_t>(r));
    return hosts;
}

// Every rank's value, in world-rank order.
std::vector<double> allgather_values(double mine, Communicator& control) {
    std::vector<double> all(static_cast<std::size_t>(control.size()));
    control.allgather(&mine, all.data(), 1, DType::float64);
    return all;
}

// The whole model's canonical parameters on pipeline rank 0 from every stage's (each in
// its units' order): every unit is taken from the first stage that holds it (the tied
// embedding's copies on the first and last stages are equal). Collective over `pp`.
std::vector<float> assemble_pipeline_parameters(const TrainPlan& plan, Communicator& pp,
                                                const std::vector<float>& mine) {
    if (pp.rank() != 0) {
        pp.send(mine.data(), mine.size(), DType::float32, 0);
        return {};
    }
    const ParameterLayout full = model_parameter_layout(plan.layout.model, plan.layout.seq_len);
    const Schedule schedule = make_schedule(plan.layout.schedule, plan.layout.schedule_shape());
    std::vector<std::vector<int>> units_of(static_cast<std::size_t>(pp.size()));
    std::vector<std::vector<float>> parts(static_cast<std::size_t>(pp.size()));
    for (int r = 0; r < pp.size(); ++r) {
        units_of[static_cast<std::size_t>(r)] =
            pipeline_part_units(plan.layout.model, pipeline_part(schedule, r, plan.layout.stage_ranges));
        std::size_t count = 0;
        for (int u : units_of[static_cast<std::size_t>(r)]) count += full.units()[static_cast<std::size_t>(u)].numel;
        if (r == 0) {
            parts[0] = mine;
        } else {
            parts[static_cast<std::size_t>(r)].resize(count);
            pp.recv(parts[static_cast<std::size_t>(r)].data(), count, DType::float32, r);
        }
    }
    std::vector<float> whole;
    for (int u = 0; u < static_cast<int>(full.units().size()); ++u) {
        for (int r = 0; r < pp.size(); ++r) {
            const auto& units = units_of[static_cast<std::size_t>(r)];
            std::size_t offset = 0;
            bool found = false;
            for (int held : units) {
                if (held == u) {
                    found = true;
                    break;
                }
                offset += full.units()[static_cast<std::size_t>(held)].numel;
            }
            if (!found) continue;
            const auto begin = parts[static_cast<std::size_t>(r)].begin() + static_cast<std::ptrdiff_t>(offset);
            whole.insert(whole.end(), begin,
                         begin + static_cast<std::ptrdiff_t>(full.units()[static_cast<std::size_t>(u)].numel));
            break;
        }
    }
    return whole;
}

void accumulate_moe(std::vector<MoeLayerStats>& totals, const std::vector<MoeLayerStats>& step) {
    if (totals.empty()) {
        totals = step;
        return;
    }
    for (std::size_t i = 0; i < step.size(); ++i) {
        MoeLayerStats& t = totals[i];
        const MoeLayerStats& s = step[i];
        for (std::size_t e = 0; e < s.tokens_per_expert.size(); ++e) t.tokens_per_expert[e] += s.tokens_per_expert[e];
        t.routed += s.routed;
        t.dropped += s.dropped;
        t.aux_loss += s.aux_loss;
        t.groups += s.groups;
        t.exchange.dispatch_ms += s.exchange.dispatch_ms;
        t.exchange.combine_ms += s.exchange.combine_ms;
        t.exchange.counts_ms += s.exchange.counts_ms;
        t.exchange.dispatch_exposed_ms += s.exchange.dispatch_exposed_ms;
        t.exchange.combine_exposed_ms += s.exchange.combine_exposed_ms;
        t.exchange.dispatch_bytes += s.exchange.dispatch_bytes;
        t.exchange.combine_bytes += s.exchange.combine_bytes;
        t.exchange.counts_bytes += s.exchange.counts_bytes;
        t.exchange.alltoallv_calls += s.exchange.alltoallv_calls;
        t.exchange.alltoall_calls += s.exchange.alltoall_calls;
    }
}

// The MoE layers' figures of the whole model per timed step, from every rank's `totals` (its
// layers `layers`) over `steps` timed steps. Collective over `control`.
std::optional<MoeMeasurements> gather_moe(const std::vector<MoeLayerStats>& totals, const std::vector<int>& layers,
                                          int steps, const TrainPlan& plan, Mesh& mesh, const Model& model,
                                          Communicator& control) {
    if (!plan.layout.model.moe) return std::nullopt;
    const std::size_t L = static_cast<std::size_t>(plan.layout.model.layers);
    const std::size_t E = static_cast<std::size_t>(plan.layout.model.moe->experts);
    // Sums over the routing groups (tp ranks route the same tokens: only tp rank 0 adds; under
    // SP each routes its own: all add), and maxima over ranks, each indexed by layer.
    constexpr std::size_t sum_fields = 4;  // routed, dropped, aux loss, groups
    std::vector<double> sums(L * (E + sum_fields), 0.0);
    constexpr std::size_t max_fields = 7;
    std::vector<double> maxima(L * max_fields, 0.0);
    const bool counts = mesh.coordinates().tp == 0 || plan.layout.sp;
    for (std::size_t i = 0; i < totals.size(); ++i) {
        const std::size_t l = static_cast<std::size_t>(layers.at(i));
        const MoeLayerStats& s = totals[i];
        double* sum = sums.data() + l * (E + sum_fields);
        if (counts) {
            for (std::size_t e = 0; e < E; ++e) sum[e] = static_cast<double>(s.tokens_per_expert[e]);
            sum[E] = static_cast<double>(s.routed);
            sum[E + 1] = static_cast<double>(s.dropped);
            sum[E + 2] = s.aux_loss;
            sum[E + 3] = s.groups;
        }
        double* max = maxima.data() + l * max_fields;
        max[0] = s.exchange.dispatch_ms;
        max[1] = s.exchange.combine_ms;
        max[2] = s.exchange.counts_ms;
        max[3] = s.exchange.dispatch_bytes;
        max[4] = s.exchange.combine_bytes;
        max[5] = s.exchange.dispatch_exposed_ms;
        max[6] = s.exchange.combine_exposed_ms;
    }
    control.allreduce(sums.data(), sums.data(), sums.size(), DType::float64, ReduceOp::sum);
    control.allreduce(maxima.data(), maxima.data(), maxima.size(), DType::float64, ReduceOp::max);
    const Model::MoeMemory memory = model.moe_memory();
    std::uint64_t sizes[2] = {memory.kept_bytes, memory.scratch_bytes};
    control.allreduce(sizes, sizes, 2, DType::uint64, ReduceOp::max);
    MoeMeasurements m;
    m.kept_bytes_measured = sizes[0];
    m.scratch_bytes_measured = sizes[1];
    m.kept_bytes_formula = moe_kept_bytes(memory.shape);
    m.scratch_bytes_formula = moe_scratch_bytes(memory.shape);
    m.dispatch_buffer_bytes_formula = moe_dispatch_buffer_bytes(memory.shape);
    const double per_step = 1.0 / std::max(steps, 1);
    for (std::size_t l = 0; l < L; ++l) {
        if (!plan.layout.model.moe->is_moe_layer(static_cast<int>(l))) continue;
        const double* sum = sums.data() + l * (E + sum_fields);
        const double* max = maxima.data() + l * max_fields;
        MoeLayerMeasurement layer;
        layer.layer = static_cast<int>(l);
        for (std::size_t e = 0; e < E; ++e) layer.tokens_per_expert.push_back(sum[e] * per_step);
        layer.routed = sum[E] * per_step;
        layer.dropped = sum[E + 1] * per_step;
        layer.aux_loss = sum[E + 3] > 0 ? sum[E + 2] / sum[E + 3] : 0.0;
        layer.dispatch_ms = max[0] * per_step;
        layer.combine_ms = max[1] * per_step;
        layer.counts_ms = max[2] * per_step;
        layer.dispatch_bytes = max[3] * per_step;
        layer.combine_bytes = max[4] * per_step;
        layer.dispatch_exposed_ms = max[5] * per_step;
        layer.combine_exposed_ms = max[6] * per_step;
        m.layers.push_back(std::move(layer));
    }
    return m;
}

// Per step: the alltoall (rows per expert) and alltoallv (dispatch, combine) calls and bytes.
TrafficByOp moe_exchange_traffic(const std::vector<MoeLayerStats>& totals, int steps) {
    // Summed over the layers first and divided once, as measured_traffic divides the
    // communicator's totals: the two must agree to the last bit.
    double alltoall_calls = 0.0, alltoall_bytes = 0.0, alltoallv_calls = 0.0, alltoallv_bytes = 0.0;
    for (const MoeLayerStats& layer : totals) {
        alltoall_calls += layer.exchange.alltoall_calls;
        alltoall_bytes += layer.exchange.counts_bytes;
        alltoallv_calls += layer.exchange.alltoallv_calls;
        alltoallv_bytes += layer.exchange.dispatch_bytes + layer.exchange.combine_bytes;
    }
    TrafficByOp traffic;
    if (alltoall_calls > 0) traffic["alltoall"] = CollectiveVolume{alltoall_calls / steps, alltoall_bytes / steps};
    if (alltoallv_calls > 0) traffic["alltoallv"] = CollectiveVolume{alltoallv_calls / steps, alltoallv_bytes / steps};
    return traffic;
}

std::vector<double> max_over_ranks(std::vector<double> values, Communicator& control) {
    control.allreduce(values.data(), values.data(), values.size(), DType::float64, ReduceOp::max);
    return values;
}

// Every rank's view of a finished step: the slowest rank's time, the highest memory peak, the
// global batch's loss (only the last pipeline stage computes one; the mean is over its ranks)
// and the grad norm (every rank's share summed).
StepProgress share_step(const StepRecord& record, int step, const TrainPlan& plan, const MemoryLedger& ledger,
                        Communicator& control) {
    double maxima[2] = {record.time_ms, static_cast<double>(ledger.usage().total_peak)};
    double sums[2] = {record.loss, record.gradient_square_sum};
    control.allreduce(maxima, maxima, 2, DType::float64, ReduceOp::max);
    control.allreduce(sums, sums, 2, DType::float64, ReduceOp::sum);
    StepProgress progress;
    progress.step = step;
    progress.total_steps = plan.options.warmup + plan.options.steps;
    progress.timed = step >= plan.options.warmup;
    progress.time_ms = maxima[0];
    progress.peak_memory_bytes = static_cast<std::size_t>(maxima[1]);
    progress.loss = sums[0] / (control.size() / plan.layout.pp);
    progress.grad_norm = std::sqrt(sums[1]);
    return progress;
}

// A tensor's identity across ranks: its name, full shape and the pieces held (FNV-1a).
std::uint64_t tensor_signature(const TensorSpec& tensor) {
    std::uint64_t hash = 1469598103934665603ull;
    const auto mix = [&hash](std::uint64_t value) {
        for (int byte = 0; byte < 8; ++byte) {
            hash ^= (value >> (8 * byte)) & 0xffu;
            hash *= 1099511628211ull;
        }
    };
    for (char c : tensor.name) mix(static_cast<unsigned char>(c));
    for (int extent : tensor.full_shape) mix(static_cast<std::uint64_t>(extent));
    for (const TensorPiece& piece : tensor.pieces)
        for (int value : {piece.row, piece.col, piece.rows, piece.cols}) mix(static_cast<std::uint64_t>(value));
    return hash | 1u;  // never 0, the padding below
}

// Per tensor of this rank's layout, its weight in the grad norm: 1 / the ranks of its model-
// parallel group (the tp x pp ranks that together hold one copy of the model) that hold the
// same elements. A tensor every tp rank holds whole (a norm's gain, a replicated MoE layer)
// counts once, a split one each piece once, and GPT's tied embedding, held by the first and
// the last pipeline stage with the same summed gradient, once. The data-parallel replicas are
// the schemes' to count (gradient_squares.hpp).
std::vector<double> model_parallel_weights(const ParameterLayout& layout, Communicator& group) {
    std::vector<std::uint64_t> mine;
    for (const TensorSpec& tensor : layout.tensors()) mine.push_back(tensor_signature(tensor));
    std::uint64_t most = mine.size();
    group.allreduce(&most, &most, 1, DType::uint64, ReduceOp::max);
    std::vector<std::uint64_t> padded(most, 0), all(most * static_cast<std::size_t>(group.size()));
    std::copy(mine.begin(), mine.end(), padded.begin());
    group.allgather(padded.data(), all.data(), most, DType::uint64);
    std::vector<double> weights;
    for (std::uint64_t signature : mine)
        weights.push_back(1.0 / static_cast<double>(std::count(all.begin(), all.end(), signature)));
    return weights;
}

// The expert-parallel group: ep consecutive ranks of the gradient group (dp x cp), and the
// expert-data-parallel group: the gradient group's ranks at the same place in their ep groups,
// which hold the same experts (without ep, neither). Megatron-core's expert layout
// (theory/expert_parallel.hpp); each split's colour is its group's first world rank, its key the
// rank's place in it.
std::pair<std::unique_ptr<Communicator>, std::unique_ptr<Communicator>> split_expert_groups(Mesh& mesh, int ep) {
    if (ep <= 1) return {};
    const int world_rank = mesh_rank(mesh.shape(), mesh.coordinates());
    const auto split = [&](const std::vector<int>& ranks) {
        const auto at = std::find(ranks.begin(), ranks.end(), world_rank);
        return mesh.gradient_group().split(ranks.front(), static_cast<int>(at - ranks.begin()));
    };
    return {split(mesh_expert_group_ranks(mesh.shape(), ep, world_rank)),
            split(mesh_expert_data_group_ranks(mesh.shape(), ep, world_rank))};
}

// What each step feeds this rank: its slice of the global batch, and the testing faults aimed at it.
StepPlan make_step_plan(const TrainPlan& plan, Mesh& mesh, int world_rank) {
    const TrainOptions& o = plan.options;
    const Layout& l = plan.layout;
    StepPlan step_plan;
    step_plan.global_batch = l.global_batch;
    step_plan.dp_rank = mesh.coordinates().dp;
    step_plan.dp_size = mesh.shape().dp;
    step_plan.gradient_group_size = mesh.gradient_group().size();
    step_plan.microbatches = l.microbatches;
    step_plan.rows_per_sample = l.model.has_sequence() ? l.seq_len : 1;
    step_plan.data_seed = o.seed;
    if (o.testing_slow_rank == world_rank) step_plan.testing_delay_ms = o.testing_slow_ms;
    if (o.testing_misread_rank == world_rank) step_plan.testing_sample_shift = 1;
    return step_plan;
}

// The watchdog hears of every call of the steps, by dimension (world ranks name the peers).
std::vector<CallObservation> observe_group_calls(CallObserver* calls, const std::vector<CommGroup>& groups, Mesh& mesh,
                                                 Communicator& control) {
    std::vector<CallObservation> observed;
    if (calls == nullptr) return observed;
    const std::pair<const char*, MeshDimension> dimensions[] = {
        {"dp", MeshDimension::dp}, {"tp", MeshDimension::tp}, {"pp", MeshDimension::pp}};
    for (const CommGroup& group : groups)
        for (const auto& [name, dimension] : dimensions)
            if (group.dimension == name)
                observed.push_back(
                    group.comm->observe_calls(*calls, name, mesh_group_ranks(mesh.shape(), dimension, control.rank())));
    std::vector<int> world_ranks(static_cast<std::size_t>(control.size()));
    for (int r = 0; r < control.size(); ++r) world_ranks[static_cast<std::size_t>(r)] = r;
    observed.push_back(control.observe_calls(*calls, "world", world_ranks));
    return observed;
}

struct ContextShape {
    int microbatch_size = 0;
    TensorSplit tp;
    ContextSplit cp;
};

// Every rank's context-parallel attention per timed step (the imbalance shows here), and whether
// every rank sent what its layers and attention shape say it should.
ContextMeasurements gather_context(ContextAttention& context, Model& model, const TrainPlan& plan, Mesh& mesh,
                                   const PipelinePart& part, const ContextShape& shape, std::size_t timed_steps,
                                   Communicator& control) {
    const double steps = static_cast<double>(std::max<std::size_t>(timed_steps, 1));
    const ContextAttentionCounters& counters = context.counters();
    ContextMeasurements cm;
    cm.compute_ms = allgather_values(counters.compute_ms / steps, control);
    cm.wait_ms = allgather_values(counters.wait_ms / steps, control);
    cm.bytes_sent = allgather_values(static_cast<double>(counters.bytes_sent) / steps, control);
    cm.messages = allgather_values(static_cast<double>(counters.messages) / steps, control);
    cm.score_elements = allgather_values(static_cast<double>(counters.score_elements) / steps, control);
    for (double rank : allgather_values(mesh.coordinates().cp, control)) cm.cp_rank.push_back(static_cast<int>(rank));
    std::uint64_t sizes[2] = {context.saved_floats(), model.context_workspace_bytes()};
    control.allreduce(sizes, sizes, 2, DType::uint64, ReduceOp::max);
    cm.saved_floats = sizes[0];
    cm.workspace_bytes = sizes[1];
    // This rank's layers (its pipeline chunks') and attention shape give what it should send.
    int layers = plan.layout.model.layers;
    if (part.active()) {
        layers = 0;
        for (const LayerRange& chunk : part.chunks) layers += chunk.end - chunk.first;
    }
    const ContextCounterVolume expected = context_parallel_counters(
        context_local_gqa_shape(plan.layout.model, shape.microbatch_size, plan.layout.local_seq_len(), shape.tp), shape.cp,
        layers, plan.layout.microbatches, plan.layout.recompute);
    const double timed = static_cast<double>(timed_steps);
    int matches = static_cast<double>(counters.bytes_sent) == expected.bytes_sent * timed &&
                          static_cast<double>(counters.messages) == expected.messages * timed
                      ? 1
                      : 0;
    control.allreduce(&matches, &matches, 1, DType::int32, ReduceOp::min);
    cm.counters_match_all_ranks = matches == 1;
    return cm;
}

// The whole model's parameters put together from this rank's canonical ones: over the expert-parallel
// group, the tensor-parallel group and the pipeline's stages, as world rank 0 (--check) needs them.
std::vector<float> assemble_model_parameters(const TrainPlan& plan, Mesh& mesh, Device& device,
                                             std::vector<float> parameters, const PipelinePart& part,
                                             Communicator* expert_group) {
    const Layout& l = plan.layout;
    // A pipeline stage's layouts hold its units only.
    auto stage_part = [&](ParameterLayout layout) {
        return l.pp > 1 ? layout.select_units(pipeline_part_units(l.model, part)) : layout;
    };
    // Under --etp a tp rank's routed experts are its slices of them.
    const auto experts_of = [&](int ep_rank, int ep_size, int tp_rank) {
        ExpertSplit split{ep_rank, ep_size};
        if (l.etp > 1) split.tensor_rank = tp_rank, split.tensor_size = l.etp;
        return split;
    };
    if (expert_group) {
        // Each rank of an expert-parallel group holds its E/ep experts: its rank 0 puts its
        // tensor-parallel rank's model together (the others hold nothing further).
        const int tp_rank = mesh.coordinates().tp;
        const TensorSplit tp_split = l.tensor_split(tp_rank);
        std::vector<ParameterLayout> shards;
        for (int q = 0; q < l.ep; ++q)
            shards.push_back(
                stage_part(model_parameter_layout(l.model, l.seq_len, tp_split, experts_of(q, l.ep, tp_rank))));
        parameters = assemble_full_parameters(
            *expert_group, device, parameters,
            stage_part(model_parameter_layout(l.model, l.seq_len, tp_split, experts_of(0, 1, tp_rank))), shards);
    }
    // The members of a tensor-parallel group share their dp and cp coordinates, so a place in their ep group.
    if (mesh.shape().tp > 1 && (!expert_group || expert_group->rank() == 0)) {
        // Each tensor-parallel rank holds its pieces: put the full model together.
        std::vector<ParameterLayout> shards;
        for (int q = 0; q < mesh.shape().tp; ++q)
            shards.push_back(stage_part(
                model_parameter_layout(l.model, l.seq_len, l.tensor_split(q), experts_of(0, 1, q))));
        parameters = assemble_full_parameters(mesh.tp(), device, parameters,
                                              stage_part(model_parameter_layout(l.model, l.seq_len)), shards);
    }
    // The stages of world rank 0's pipeline group put the whole model together.
    if (l.pp > 1 && mesh.coordinates().dp == 0 && mesh.coordinates().tp == 0 && mesh.coordinates().cp == 0)
        parameters = assemble_pipeline_parameters(plan, mesh.pp(), parameters);
    return parameters;
}

// What the timed steps add up to on this rank, step by step or summed.
struct TimedSteps {
    std::vector<double> step_ms, exposed_ms, compute_ms;
    std::map<std::string, std::vector<double>> comm_ms_by_dimension, exposed_ms_by_dimension;
    std::vector<MoeLayerStats> moe_totals;  // this rank's MoE layers over the timed steps
    ThreadCounters counters;
    PipelineStepStats pipeline_totals;
    double peer_wait_ms = 0.0;
    std::vector<double> pipeline_span_ms;
    std::array<double, 4> passes_total{};  // forward, input_grad, weight_grad, weight_grad_deferred

    void add(const StepRecord& record, const ThreadCounters& in_step, const std::vector<CommGroup>& groups) {
        step_ms.push_back(record.time_ms);
        counters += in_step;
        exposed_ms.push_back(record.exposed_comm_ms);
        compute_ms.push_back(record.compute_ms());
        for (const CommGroup& group : groups) {
            comm_ms_by_dimension[group.dimension].push_back(record.comm_ms.at(group.dimension));
            exposed_ms_by_dimension[group.dimension].push_back(record.exposed_ms.at(group.dimension));
        }
        accumulate_moe(moe_totals, record.moe);
        peer_wait_ms += record.pipeline.peer_wait_ms;
        pipeline_span_ms.push_back(record.pipeline.pipeline_ms);
        pipeline_totals.compute_ms += record.pipeline.compute_ms;
        pipeline_totals.recv_wait_ms += record.pipeline.recv_wait_ms;
        pipeline_totals.send_ms += record.pipeline.send_ms;
        pipeline_totals.p2p_bytes += record.pipeline.p2p_bytes;
        passes_total[0] += record.passes.forward;
        passes_total[1] += record.passes.input_grad;
        passes_total[2] += record.passes.weight_grad;
        passes_total[3] += record.passes.weight_grad_deferred;
    }
    // The timed steps run: fewer than asked if the run diverged; at least one, to divide by.
    double steps() const { return static_cast<double>(std::max<std::size_t>(step_ms.size(), 1)); }
};

// Every rank's pipeline stage and its passes of each kind per timed step.
void gather_passes(TrainMeasurements& result, const TimedSteps& timed, Mesh& mesh, Communicator& control) {
    for (double rank : allgather_values(mesh.coordinates().pp, control))
        result.pp_rank_of_rank.push_back(static_cast<int>(rank));
    result.passes_by_rank.resize(result.pp_rank_of_rank.size());
    for (std::size_t kind = 0; kind < timed.passes_total.size(); ++kind) {
        const std::vector<double> all = allgather_values(timed.passes_total[kind] / timed.steps(), control);
        for (std::size_t r = 0; r < all.size(); ++r) result.passes_by_rank[r][kind] = all[r];
    }
}

// Every rank's pipeline figures per timed step, and each stage's kept activations as scheduled.
PipelineMeasurements gather_pipeline(const TimedSteps& timed, const TrainPlan& plan, const Schedule& schedule,
                                     Mesh& mesh, std::vector<std::vector<TimelineEvent>> traced_events,
                                     Communicator& control) {
    const Layout& l = plan.layout;
    const double steps = timed.steps();
    PipelineMeasurements pm;
    pm.span_ms = max_over_ranks(timed.pipeline_span_ms, control);
    for (double stage : allgather_values(mesh.coordinates().pp, control)) pm.stage_of_rank.push_back(static_cast<int>(stage));
    pm.compute_ms = allgather_values(timed.pipeline_totals.compute_ms / steps, control);
    pm.recv_wait_ms = allgather_values(timed.pipeline_totals.recv_wait_ms / steps, control);
    pm.send_ms = allgather_values(timed.pipeline_totals.send_ms / steps, control);
    pm.p2p_bytes = allgather_values(static_cast<double>(timed.pipeline_totals.p2p_bytes) / steps, control);
    pm.peer_wait_ms = allgather_values(timed.peer_wait_ms / steps, control);
    pm.in_flight = peak_in_flight(schedule, l.p2p);
    for (int r = 0; r < l.pp; ++r)
        pm.kept_pools.push_back(activation_pool(pipeline_part(schedule, r, l.stage_ranges, l.p2p),
                                                transformer_layer_store_kinds(l.model, l.recompute)));
    pm.events = std::move(traced_events);
    return pm;
}

// Every parallel dimension's group, those of more than one rank apart (a group of one issues
// nothing and is not reported). Under context parallelism the gradient group is dp x cp
// ("dp_cp"; the dp group alone then carries nothing) and "cp" the attention's transfers.
struct ReportedGroups {
    std::vector<CommGroup> groups, groups_of_one;
};
ReportedGroups reported_groups(Mesh& mesh, bool context_parallel, Communicator* expert_group,
                               Communicator* expert_data_group) {
    ReportedGroups out;
    const std::vector<CommGroup> dimensions =
        context_parallel ? std::vector<CommGroup>{{"dp_cp", &mesh.gradient_group()}, {"tp", &mesh.tp()},
                                                  {"pp", &mesh.pp()}, {"cp", &mesh.cp()}}
                         : std::vector<CommGroup>{{"dp", &mesh.dp()}, {"tp", &mesh.tp()}, {"pp", &mesh.pp()}};
    for (const CommGroup& group : dimensions)
        (group.comm->size() > 1 ? out.groups : out.groups_of_one).push_back(group);
    if (expert_group) out.groups.push_back({"ep", expert_group});  // the MoE layers' dispatch and combine
    if (expert_data_group && expert_data_group->size() > 1)
        out.groups.push_back({"edp", expert_data_group});  // the routed experts' gradients
    return out;
}

// --check: an MoE run records its routing where its groups are whole micro-batches, and says
// why not elsewhere.
std::optional<RoutingTrace> routing_to_record(const Layout& l, bool keep_parameters, const RoutingTrace* follow_routing,
                                              TrainMeasurements& result) {
    if (!keep_parameters || !l.model.moe || follow_routing != nullptr) return std::nullopt;
    if (l.sp) {
        result.routing_not_recorded = "under --sp each tensor-parallel rank routes its own slice of a micro-batch";
        return std::nullopt;
    }
    if (l.cp > 1) {
        result.routing_not_recorded = "under --cp each context-parallel rank routes its own slice of a micro-batch";
        return std::nullopt;
    }
    return RoutingTrace(l.seq_len);
}

// Each reported group's counted calls and times (max over ranks), the calls groups of one
// issued anyway, and whether every rank's traffic is what the layout implies.
void gather_comm(TrainMeasurements& result, TimedSteps& timed, const ReportedGroups& reported, const TrainPlan& plan,
                 Mesh& mesh, bool expert_parallel, Communicator& control) {
    const int steps = plan.options.steps;
    for (const CommGroup& group : reported.groups) {
        result.comm[group.dimension] = group.comm->stats();
        result.comm_ms[group.dimension] = max_over_ranks(timed.comm_ms_by_dimension[group.dimension], control);
        result.exposed_ms[group.dimension] = max_over_ranks(timed.exposed_ms_by_dimension[group.dimension], control);
    }
    for (const CommGroup& group : reported.groups_of_one)
        for (const auto& [op, counter] : group.comm->stats().by_op) result.calls_on_groups_of_one += counter.calls;
    control.allreduce(&result.calls_on_groups_of_one, &result.calls_on_groups_of_one, 1, DType::uint64,
                      ReduceOp::sum);
    result.expected_traffic = expected_rank_traffic(plan, mesh.shape(), mesh.coordinates());
    // The ep group's traffic follows the routing: expected is what the MoE layers say they sent.
    if (expert_parallel) result.expected_traffic["ep"] = moe_exchange_traffic(timed.moe_totals, steps);
    for (const CommGroup& group : reported.groups) {
        int matches = traffic_matches(result.expected_traffic[group.dimension],
                                      measured_traffic(group.comm->stats(), steps)) ? 1 : 0;
        control.allreduce(&matches, &matches, 1, DType::int32, ReduceOp::min);
        result.expected_matches_all_ranks[group.dimension] = matches == 1;
    }
}

// Every rank's compute time of each timed step.
std::vector<std::vector<double>> gather_compute_by_rank(const TimedSteps& timed, Communicator& control) {
    const std::size_t steps = timed.step_ms.size();
    std::vector<std::vector<double>> by_rank;
    for (int rank = 0; rank < control.size(); ++rank) by_rank.emplace_back(steps);
    std::vector<double> all_compute(steps * static_cast<std::size_t>(control.size()));
    control.allgather(timed.compute_ms.data(), all_compute.data(), timed.compute_ms.size(), DType::float64);
    for (std::size_t i = 0; i < all_compute.size(); ++i) by_rank[i / steps][i % steps] = all_compute[i];
    return by_rank;
}

// The warm-up and timed steps: each step's progress shared and observed, its figures kept once
// timed (counters reset at the first timed step), --trace's events gathered to rank 0 after
// each timed step; a non-finite loss stops every rank at the same step.
void run_steps(const TrainPlan& plan, StepDriver& driver, const MemoryLedger& ledger, PipelineExecutor* executor,
               const ReportedGroups& reported, ContextAttention* context, StepObserver* observer, Communicator& control,
               TrainMeasurements& result,
               std::vector<double>& losses, TimedSteps& timed, std::vector<std::vector<TimelineEvent>>& traced_events) {
    const TrainOptions& o = plan.options;
    const std::vector<CommGroup>& groups = reported.groups;
    std::size_t events_gathered = 0;
    for (int step = 0; step < o.warmup + o.steps; ++step) {
        // Before the barrier below: the observer's watchdog then watches that wait too.
        if (observer) observer->step_starting(step, step >= o.warmup);
        if (step == o.warmup) {  // count the timed steps only
            for (const CommGroup& group : groups) group.comm->stats().reset();
            for (const CommGroup& group : reported.groups_of_one) group.comm->stats().reset();
            if (context) context->reset_counters();
            if (executor != nullptr) {  // the trace's clock starts at a barrier, alike on every rank
                control.barrier();
                executor->set_origin(std::chrono::steady_clock::now());
                executor->set_recording(!o.trace_path.empty());
            }
        }
        // Read around the step, outside its timed window (run_step times inside itself).
        const ThreadCounters before_step = read_thread_counters();
        const StepRecord record = driver.run_step(step);
        const ThreadCounters in_step = counters_between(before_step, read_thread_counters());
        const StepProgress progress = share_step(record, step, plan, ledger, control);
        if (executor != nullptr && !o.trace_path.empty() && step >= o.warmup) {
            auto step_events = gather_events(executor->events(), events_gathered, control);
            events_gathered = executor->events().size();
            if (control.rank() == 0) {
                if (observer) observer->timeline_gathered(step_events);
                traced_events.resize(step_events.size());
                for (std::size_t r = 0; r < step_events.size(); ++r)
                    traced_events[r].insert(traced_events[r].end(), step_events[r].begin(), step_events[r].end());
            }
        }
        if (!std::isfinite(progress.loss)) {
            result.diverged = progress;
            if (observer) observer->step_finished(progress);  // the log's last line counts it
            break;
        }
        if (observer) observer->step_finished(progress);
        losses.push_back(record.loss);
        if (step >= o.warmup) timed.add(record, in_step, groups);
    }
}

// The whole model's parameters, and the most any rank holds.
void count_parameters(TrainMeasurements& result, const Layout& l, const Model& model, Communicator& control) {
    result.parameters = model_parameter_layout(l.model, l.seq_len).total_numel();
    std::uint64_t local_parameters = model.layout().total_numel();
    control.allreduce(&local_parameters, &local_parameters, 1, DType::uint64, ReduceOp::max);
    result.parameters_per_rank = local_parameters;
}

// Every rank's loss is the mean over its slice; the global batch's is their mean. Only the last
// pipeline stage computes it (the others report 0), so the mean is over its ranks.
std::vector<double> global_batch_losses(std::vector<double> losses, int pp, Communicator& control) {
    control.allreduce(losses.data(), losses.data(), losses.size(), DType::float64, ReduceOp::sum);
    for (double& loss : losses) loss /= control.size() / pp;
    return losses;
}

}  // namespace

// Read top to bottom as llm.c's main: build the groups, model, scheme and driver; run the steps;
// gather. It stays one function (~100 lines) because the three parts share some fifteen locals
// (groups, schedule, model, ledger, timed steps) that a split would pass around as one more struct.
TrainMeasurements run_training(const TrainPlan& plan, Mesh& mesh, Device& device, Ops& ops, Communicator& control,
                               bool keep_parameters, StepObserver* observer, RoutingTrace* follow_routing) {
    const TrainOptions& o = plan.options;
    const Layout& l = plan.layout;
    MicrobatchShape shape;
    shape.batch = plan.layout.microbatch_size;
    shape.seq_len = plan.layout.seq_len;
    shape.microbatches = l.microbatches;

    MemoryLedger ledger(device);
    const TensorParallelGroup tp(mesh.tp(), plan.layout.tensor_split(mesh.coordinates().tp));
    const bool pipelined = l.pp > 1;
    std::optional<Schedule> schedule;
    PipelinePart part;
    if (pipelined) {
        schedule = make_schedule(plan.layout.schedule, plan.layout.schedule_shape());
        part = pipeline_part(*schedule, mesh.coordinates().pp, plan.layout.stage_ranges, plan.layout.p2p);
    }
    const ContextGroup cp{&mesh.cp(), plan.layout.context_split(mesh.coordinates().cp)};
    // The balancing biases' loads are summed over the ranks that route the rest of the step's
    // batch: the gradient group (dp x cp).
    auto [expert_group, expert_data_group] = split_expert_groups(mesh, l.ep);
    // --etp: each routed expert's width split over the tp group (its all-reduces counted as tp's).
    TrainMeasurements result;
    std::optional<RoutingTrace> recorded = routing_to_record(l, keep_parameters, follow_routing, result);
    const MoeContext moe{l.moe,
                         &mesh.gradient_group(),
                         expert_group.get(),
                         l.etp > 1 ? &mesh.tp() : nullptr,
                         recorded ? &*recorded : nullptr,
                         follow_routing};
    std::unique_ptr<Model> model = make_model(l.model, shape, o.seed, ops, ledger, tp, part, l.precision,
                                              l.recompute, cp, moe, l.attention);
    // Gradients are averaged over dp x cp (Mesh::gradient_group), so DDP and ZeRO run on it; the
    // routed experts' over the expert-data-parallel group.
    // A pipeline sums its tied embedding's gradient across stages after backward, so it keeps
    // the optimizer after backward too.
    SchemeSettings scheme_settings = l.scheme();
    scheme_settings.adamw.lr = static_cast<float>(o.lr);
    scheme_settings.update_in_backward = !pipelined;
    // The grad norm's weights: one copy of the model is the tp x pp ranks at this dp and cp place.
    const MeshCoordinates at = mesh.coordinates();
    const std::unique_ptr<Communicator> model_copy = control.split(at.dp * mesh.shape().cp + at.cp, control.rank());
    std::unique_ptr<TrainingScheme> scheme =
        make_model_scheme(device, ops, mesh.gradient_group(),
                          expert_data_group ? *expert_data_group : mesh.gradient_group(), ledger, *model,
                          scheme_settings, model_parallel_weights(model->layout(), *model_copy));
    scheme->initialize_parameters(o.seed);

    const StepPlan step_plan = make_step_plan(plan, mesh, control.rank());
    std::optional<PipelineExecutor> executor;
    if (pipelined)
        executor.emplace(*schedule, mesh.coordinates().pp, plan.layout.p2p, *model, *scheme, mesh.pp(), ops, ledger, control,
                         mesh_group_ranks(mesh.shape(), MeshDimension::pp, control.rank()),
                         l.moe.a2a_overlap_1f1b);
    const ReportedGroups reported = reported_groups(mesh, cp.active(), expert_group.get(), expert_data_group.get());
    const std::vector<CommGroup>& groups = reported.groups;
    ContextAttention* context = model->context_attention();
    StepDriver driver(*model, *scheme, device, control, step_plan, groups, executor ? &*executor : nullptr);

    count_parameters(result, l, *model, control);
    std::vector<double> losses;
    TimedSteps timed;
    const std::vector<CallObservation> observed =
        observe_group_calls(observer ? observer->call_observer() : nullptr, groups, mesh, control);
    // --trace: every rank's events reach rank 0 after each step, so a run that stops later keeps them.
    std::vector<std::vector<TimelineEvent>> traced_events;
    run_steps(plan, driver, ledger, executor ? &*executor : nullptr, reported, context, observer, control, result, losses,
              timed, traced_events);
    gather_passes(result, timed, mesh, control);
    if (observer) observer->gathering_results();
    if (executor) result.pipeline = gather_pipeline(timed, plan, *schedule, mesh, std::move(traced_events), control);
    gather_comm(result, timed, reported, plan, mesh, expert_group != nullptr, control);
    result.moe = gather_moe(timed.moe_totals, model->moe_layers(), static_cast<int>(timed.step_ms.size()), plan, mesh,
                            *model, control);
    result.compute_ms_by_rank = gather_compute_by_rank(timed, control);
    result.host_of_rank = gather_host_names(control);
    result.counters_by_rank = gather_thread_counters(timed.counters, control);
    if (context)
        result.context =
            gather_context(*context, *model, plan, mesh, part, {shape.batch, tp.split(), cp.split}, timed.step_ms.size(), control);
    std::uint64_t activation_bytes = model->activation_bytes_per_layer();
    control.allreduce(&activation_bytes, &activation_bytes, 1, DType::uint64, ReduceOp::max);
    result.activation_bytes_per_layer = activation_bytes;
    result.step_ms = max_over_ranks(timed.step_ms, control);
    result.exposed_comm_ms = max_over_ranks(timed.exposed_ms, control);
    result.loss = global_batch_losses(std::move(losses), l.pp, control);
    result.memory_by_rank = gather_memory(ledger.usage(), control);
    if (recorded) {
        recorded->gather(control);
        if (control.rank() == 0) result.routing = std::move(recorded);
    }
    if (keep_parameters) {
        std::vector<float> parameters =
            assemble_model_parameters(plan, mesh, device, scheme->canonical_parameters(), part, expert_group.get());
        if (control.rank() == 0) result.final_parameters = std::move(parameters);
    }
    return result;
}

TrainPlan serial_reference_plan(const TrainPlan& plan, int dp) {
    TrainPlan serial = plan;
    Layout& l = serial.layout;
    l.dp = 1;
    l.tp = 1;
    l.sp = false;
    l.tp_style = TensorParallelStyle::megatron;
    l.pp = 1;
    l.stage_ranges.clear();
    l.zero = 0;
    // An MoE layer routes one group per micro-batch and rank (train/moe/router.hpp): its
    // capacity and balancing loss count over the group. The reference routes the same groups,
    // the global batch in micro-batches of one rank's size, in the same order.
    l.microbatches = plan.layout.model.moe ? dp * plan.layout.microbatches : 1;
    l.microbatch_size = l.global_batch / l.microbatches;
    l.overlap = false;
    l.prefetch = false;
    serial.options.testing_slow_rank = -1;
    serial.options.testing_misread_rank = -1;
    // The reference keeps every activation, so --check with --recompute shows the recompute
    // changes nothing.
    l.recompute = Recompute::none;
    // ... and computes attention over whole sequences on one rank, every expert whole.
    l.cp = 1;
    l.cp_style = ContextStyle::ring;
    l.cp_balance = ContextBalance::zigzag;
    l.ep = 1;
    l.etp = 1;
    return serial;
}

CheckTolerances check_tolerances(const TrainPlan& plan) {
    AdamWSettings adamw = plan.layout.scheme().adamw;
    adamw.lr = static_cast<float>(plan.options.lr);  // as run_training sets it
    return check_tolerances(plan.layout.model, plan.layout.seq_len, plan.layout.precision, adamw,
                            plan.options.warmup + plan.options.steps);
}

CheckResult check_against_serial_reference(const TrainPlan& plan, int dp, const TrainMeasurements& measurements,
                                           Mesh& serial_mesh, Device& device, Ops& ops, Communicator& self,
                                           StepObserver* observer) {
    std::optional<RoutingTrace> routing = measurements.routing;
    const TrainMeasurements reference = run_training(serial_reference_plan(plan, dp), serial_mesh, device, ops, self,
                                                     true, observer, routing ? &*routing : nullptr);
    const CheckTolerances tolerances = check_tolerances(plan);
    CheckResult check = compare_with_reference(measurements.loss, measurements.final_parameters, reference.loss,
                                               reference.final_parameters,
                                               model_parameter_layout(plan.layout.model, plan.layout.seq_len), tolerances);
    if (plan.layout.model.moe) {
        // A flip is a near-tie when the arithmetic's own tolerance could move a score by its margin.
        check.routing = routing ? routing->comparison(tolerances.params) : RoutingComparison{};
        if (!routing) check.routing->not_followed = measurements.routing_not_recorded;
        check.passed = check.passed && check.routing->passed();
    }
    return check;
}

}  // namespace parbench

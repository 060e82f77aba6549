#include "theory/traffic.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "theory/model_layout.hpp"
#include "theory/moe_memory.hpp"

namespace parbench {
namespace {

constexpr double float_bytes = 4.0;

void add(TrafficByOp& traffic, const std::string& op, double calls, double elements) {
    if (calls <= 0.0) return;
    CollectiveVolume& volume = traffic[op];
    volume.calls += calls;
    volume.bytes += calls * elements * float_bytes;
}

}  // namespace

ModelShare whole_model_share(const ModelConfig& config) {
    return ModelShare{config.layers, true, true, config.moe_layer_count()};
}

TrafficByOp expert_parallel_traffic(const ModelConfig& config, double tokens, int microbatches, int ep,
                                    const ModelShare& share, Recompute recompute, int alltoallv_parts) {
    TrafficByOp traffic;
    if (!config.moe || ep <= 1 || share.moe_layers == 0) return traffic;
    const double forwards = recompute == Recompute::full ? 2.0 : 1.0;
    const double layer_micro = static_cast<double>(share.moe_layers) * microbatches;
    const double rows = tokens * config.moe->top_k;
    // int32 counts and fp32 rows: both 4 bytes, add()'s element.
    add(traffic, "alltoall", layer_micro * forwards, static_cast<double>(config.moe->experts));
    add(traffic, "alltoallv", layer_micro * (2.0 * forwards + 2.0) * alltoallv_parts,
        rows * config.hidden / alltoallv_parts);
    return traffic;
}

TrafficByOp tensor_parallel_traffic(const ModelConfig& config, int seq_len, int microbatch_size, int microbatches,
                                    const TensorSplit& split, const ModelShare& share, Recompute recompute, int ep) {
    TrafficByOp traffic;
    if (split.size == 1) return traffic;
    const double m = microbatches;
    const double h = config.hidden;
    if (config.has_sequence()) {
        const bool llama = config.kind == ModelKind::llama;
        const double l = share.layers;
        const double e = share.first_stage ? 1.0 : 0.0;
        const double d = share.last_stage ? 1.0 : 0.0;
        const double r = static_cast<double>(microbatch_size) * seq_len;
        const double n = r * h;
        // An MoE layer runs replicated over tp (train/moe/moe_layer.hpp): its MLP has neither the
        // forward's all-reduce of the row-parallel output nor the backward's of the input
        // gradient. Under SP it runs on the rank's own rows: none of the MLP's three all-gathers
        // (forward input, backward output gradient, backward input again) nor its two
        // reduce-scatters, but one all-reduce of its parameters' partial gradients (a pack).
        const double moe = share.moe_layers;
        if (!split.sequence_parallel) {
            add(traffic, "allreduce", m * (4.0 * l - 2.0 * moe + e + d), n);
            add(traffic, "allreduce", m * 3.0 * d, r);
        } else {
            add(traffic, "allgather", m * (6.0 * l - 3.0 * moe + e + 2.0 * d), n);
            add(traffic, "reducescatter", m * (4.0 * l - 2.0 * moe + e + d), n);
            if (config.moe && moe > 0) {
                const ModelConfig::Moe& x = *config.moe;
                const MoeMemoryShape shape{0, static_cast<std::size_t>(h), static_cast<std::size_t>(x.experts),
                                           static_cast<std::size_t>(x.top_k), static_cast<std::size_t>(x.expert_hidden),
                                           static_cast<std::size_t>(x.shared_experts), static_cast<std::size_t>(ep),
                                           x.activation};
                add(traffic, "allreduce", m * moe, static_cast<double>(moe_sequence_parallel_pack_floats(shape)));
            }
            add(traffic, "allreduce", m * 3.0 * d, r);
            // The norms' partial weight gradients: LayerNorm weight and bias, RMSNorm gain only.
            add(traffic, "allreduce", m * l, (llama ? 2.0 : 4.0) * h);
            add(traffic, "allreduce", m * d, (llama ? 1.0 : 2.0) * h);
        }
        if (llama && !llama_kv_heads_split(config, split.size))
            add(traffic, "allreduce", m * l, 2.0 * config.kv_heads * (config.hidden / config.heads) * h);
        if (recompute == Recompute::full) {
            if (split.sequence_parallel) {
                add(traffic, "allgather", m * (2.0 * l - moe), n);
                add(traffic, "reducescatter", m * (2.0 * l - moe), n);
            } else {
                add(traffic, "allreduce", m * (2.0 * l - moe), n);
            }
        }
        return traffic;
    }
    if (config.kind != ModelKind::mlp)
        throw std::logic_error("tensor_parallel_traffic: no formula for model kind " + model_kind_name(config.kind) +
                               " yet; add it to src/theory/traffic.cpp");
    // The MLP is never pipelined (train_options.cpp): the whole model.
    const double r = microbatch_size;
    const double n = r * h;
    const int layers = config.layers;
    const double L = layers;
    if (split.style == TensorParallelStyle::allgather) {
        add(traffic, "allgather", m * (L - 1.0), n);
        add(traffic, "reducescatter", m * (L - 1.0), n);
        add(traffic, "allreduce", m, r);
        return traffic;
    }
    const double row_layers = layers / 2;              // layers 1, 3, 5, ...
    const double column_layers = layers - row_layers;  // layers 0, 2, 4, ...
    add(traffic, "allreduce", m * (row_layers + column_layers - 1.0), n);
    if (layers % 2 == 1) add(traffic, "allreduce", m, r);  // the loss over the last layer's slices
    return traffic;
}

TrafficByOp pipeline_traffic(const std::vector<int>& virtual_stages_held, int virtual_stage_count, int microbatches,
                             double boundary_bytes, double tied_embedding_bytes) {
    TrafficByOp traffic;
    if (virtual_stage_count <= 1) return traffic;
    double transfers = 0.0;  // each way, per micro-batch
    for (int stage : virtual_stages_held) {
        if (stage + 1 < virtual_stage_count) transfers += 1.0;  // activation out, its gradient back in
        if (stage > 0) transfers += 1.0;                        // activation in, its gradient back out
    }
    const double calls = transfers * microbatches;
    if (calls > 0.0) {
        traffic["send"] = CollectiveVolume{calls, calls * boundary_bytes};
        traffic["recv"] = CollectiveVolume{calls, calls * boundary_bytes};
    }
    if (tied_embedding_bytes > 0.0) traffic["sendrecv"] = CollectiveVolume{1.0, tied_embedding_bytes};
    return traffic;
}

TrafficByOp data_parallel_traffic(const ParameterLayout& layout, int dp, const SchemeSettings& scheme,
                                  const std::vector<int>& use_order) {
    TrafficByOp traffic;
    if (dp == 1) return traffic;
    const double m = scheme.microbatches;
    auto add_bytes = [&](const std::string& op, double calls, double bytes) {
        CollectiveVolume& volume = traffic[op];
        volume.calls += calls;
        volume.bytes += calls * bytes;
    };
    if (scheme.zero_stage == 3) {
        const FlatLayout flat(layout, one_unit_per_group(layout), dp);
        for (int unit : use_order)
            add_bytes("allgather", m, static_cast<double>(flat.segment_of_unit(unit).padded_numel) * float_bytes);
        for (const Segment& s : flat.segments())
            add_bytes("reducescatter", m, static_cast<double>(s.padded_numel) * float_bytes);
        return traffic;
    }
    const UnitGroups buckets = group_units_by_bytes(layout, scheme.bucket_bytes);
    if (scheme.zero_stage == 0) {
        const FlatLayout flat(layout, buckets, 1);
        for (const Segment& s : flat.segments()) add_bytes("allreduce", 1.0, static_cast<double>(s.numel) * float_bytes);
        return traffic;
    }
    const FlatLayout flat(layout, buckets, dp);
    const double reductions = scheme.zero_stage == 1 ? 1.0 : m;
    for (const Segment& s : flat.segments()) {
        add_bytes("reducescatter", reductions, static_cast<double>(s.padded_numel) * float_bytes);
        add_bytes("allgather", 1.0, static_cast<double>(s.padded_numel) * float_bytes);
    }
    return traffic;
}

RecomputeRegather deepspeed_recompute_regather(const std::vector<std::vector<double>>& block_modules, int blocks,
                                               double turn_elements, const DeepSpeedZero3Config& settings) {
    const int per_block = static_cast<int>(block_modules.size());
    const int turn = blocks * per_block;  // the module id of the final norm and head
    // A parameter at or under the persistence threshold is never partitioned (ds_persist): it is
    // neither gathered nor released, but the reuse walk counts it (it walks ds_numel).
    auto gathered_of = [&](int module) {
        const std::vector<double> params =
            module == turn ? std::vector<double>{turn_elements} : block_modules[static_cast<std::size_t>(module % per_block)];
        double elements = 0.0;
        for (double p : params)
            if (p > settings.param_persistence_threshold) elements += p;
        return elements;
    };
    auto total_of = [&](int module) {
        if (module == turn) return turn_elements;
        double elements = 0.0;
        for (double p : block_modules[static_cast<std::size_t>(module % per_block)]) elements += p;
        return elements;
    };
    struct Use {
        int module;
        bool recompute_forward;
    };
    std::vector<Use> trace;
    for (int b = 0; b < blocks; ++b)
        for (int k = 0; k < per_block; ++k) trace.push_back({b * per_block + k, false});
    trace.push_back({turn, false});
    trace.push_back({turn, false});
    for (int b = blocks - 1; b >= 0; --b) {
        for (int k = 0; k < per_block; ++k) trace.push_back({b * per_block + k, true});
        for (int k = per_block - 1; k >= 0; --k) trace.push_back({b * per_block + k, false});
    }
    const std::size_t modules = static_cast<std::size_t>(turn) + 1;
    std::vector<double> gathered(modules), total(modules);
    for (std::size_t m = 0; m < modules; ++m) {
        gathered[m] = gathered_of(static_cast<int>(m));
        total[m] = total_of(static_cast<int>(m));
    }
    // The coordinator's parameter queue: the uses of partitioned parameters, in trace order.
    std::vector<std::size_t> queue;
    for (std::size_t s = 0; s < trace.size(); ++s)
        if (gathered[static_cast<std::size_t>(trace[s].module)] > 0.0) queue.push_back(s);
    constexpr double never = -1.0;
    std::vector<char> available(modules, 0), released_after_recompute(modules, 0);
    std::vector<double> walked_to(modules, never);  // __most_recent_step_id_param_fetched_for
    std::size_t next = 0;
    double live = 0.0;  // __n_available_params
    RecomputeRegather out;
    auto gather = [&](std::size_t m) {
        available[m] = 1;
        live += gathered[m];
        if (released_after_recompute[m]) {
            out.elements += gathered[m];
            out.uses += 1.0;
            released_after_recompute[m] = 0;
        }
    };
    for (std::size_t s = 0; s < trace.size(); ++s) {
        const std::size_t m = static_cast<std::size_t>(trace[s].module);
        if (gathered[m] == 0.0) continue;
        // fetch_sub_module: gather what is not held, take this use off the queue, prefetch ahead.
        if (!available[m]) gather(m);
        if (walked_to[m] < static_cast<double>(s)) {
            if (next >= queue.size() || queue[next] != s)
                throw std::logic_error("deepspeed_recompute_regather: the trace and its queue disagree");
            walked_to[m] = static_cast<double>(s);
            ++next;
        }
        const double budget = std::min(settings.max_live_parameters - live, settings.prefetch_bucket_size);
        double prefetching = 0.0;
        std::vector<std::size_t> batch;
        while (next < queue.size() && prefetching < budget) {
            const std::size_t use = queue[next++];
            const std::size_t ahead = static_cast<std::size_t>(trace[use].module);
            walked_to[ahead] = std::max(walked_to[ahead], static_cast<double>(use));
            if (!available[ahead] && std::find(batch.begin(), batch.end(), ahead) == batch.end()) {
                batch.push_back(ahead);
                prefetching += gathered[ahead];
            }
        }
        for (std::size_t ahead : batch) gather(ahead);
        // release_sub_module after this use (the coordinator's step is s + 1 by then): kept when a
        // prefetch walk passed a later use, or a use recurs within the reuse distance.
        const std::size_t step = s + 1;
        bool release = walked_to[m] <= static_cast<double>(step);
        double traversed = 0.0;
        for (std::size_t t = step; release && t < trace.size(); ++t) {
            if (traversed >= settings.max_reuse_distance) break;
            if (static_cast<std::size_t>(trace[t].module) == m) release = false;
            traversed += total[static_cast<std::size_t>(trace[t].module)];
        }
        if (release && available[m]) {
            available[m] = 0;
            live -= gathered[m];
            if (trace[s].recompute_forward) released_after_recompute[m] = 1;
        }
    }
    return out;
}

RecomputeRegather deepspeed_recompute_regather(const ModelConfig& config, const ParameterLayout& layout,
                                               const DeepSpeedZero3Config& settings) {
    if (!config.has_sequence() || config.moe)
        throw std::logic_error("deepspeed_recompute_regather: dense GPT and Llama only, not " + config.name);
    const bool llama = config.kind == ModelKind::llama;
    // Megatron-DeepSpeed's submodules of a block, by the tensors of theory/model_layout.cpp.
    const std::map<std::string, int> submodule_of =
        llama ? std::map<std::string, int>{{"norm1", 0}, {"wq", 1}, {"wk", 1}, {"wv", 1}, {"wo", 2},
                                           {"norm2", 3}, {"wgate", 4}, {"wup", 4}, {"wdown", 5}}
              : std::map<std::string, int>{{"ln1w", 0}, {"ln1b", 0}, {"qkvw", 1}, {"qkvb", 1},
                                           {"attprojw", 2}, {"attprojb", 2}, {"ln2w", 3}, {"ln2b", 3},
                                           {"fcw", 4}, {"fcb", 4}, {"fcprojw", 5}, {"fcprojb", 5}};
    std::vector<std::vector<double>> block(6);
    double turn = 0.0;
    for (const TensorSpec& tensor : layout.tensors()) {
        const std::string& name = tensor.name;
        const double numel = static_cast<double>(tensor.numel);
        if (name.rfind("h0.", 0) == 0) {
            const auto found = submodule_of.find(name.substr(3));
            if (found == submodule_of.end())
                throw std::logic_error("deepspeed_recompute_regather: no submodule for tensor " + name);
            block[static_cast<std::size_t>(found->second)].push_back(numel);
        } else if (llama ? name == "norm_final" || name == "wout" : name == "wte" || name == "lnfw" || name == "lnfb") {
            turn += numel;  // the final norm and the head (GPT's is the tied embedding)
        }
    }
    return deepspeed_recompute_regather(block, config.layers, turn, settings);
}

bool traffic_matches(const TrafficByOp& expected, const TrafficByOp& measured) {
    if (expected.size() != measured.size()) return false;
    for (const auto& [op, volume] : expected) {
        const auto found = measured.find(op);
        if (found == measured.end() || found->second.calls != volume.calls || found->second.bytes != volume.bytes)
            return false;
    }
    return true;
}

}  // namespace parbench

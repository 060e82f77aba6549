#include "train/train_report.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "bench/statistics.hpp"
#include "theory/context_parallel.hpp"
#include "theory/memory.hpp"
#include "theory/tensor_parallel_cost.hpp"
#include "train/comm_report.hpp"
#include "train/pipeline/pipeline_report.hpp"

namespace parbench {
namespace {

// Per world rank: the compute passes of a timed step as the engine ran them (forward, input
// gradient B, weight gradient, and how many of those ran as W actions of their own), beside
// theory/pipeline/schedule.hpp's pass_counts, which `plan` reports per pipeline rank.
nlohmann::json passes_json(const TrainMeasurements& m) {
    nlohmann::json ranks = nlohmann::json::array();
    for (std::size_t r = 0; r < m.passes_by_rank.size(); ++r)
        ranks.push_back({{"rank", r}, {"pp_rank", m.pp_rank_of_rank[r]}, {"forward", m.passes_by_rank[r][0]},
                         {"input_grad", m.passes_by_rank[r][1]}, {"weight_grad", m.passes_by_rank[r][2]},
                         {"weight_grad_deferred", m.passes_by_rank[r][3]}});
    return ranks;
}

nlohmann::json optional_number(const std::optional<double>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json summary_json(const Summary& s) {
    return {{"mean", s.mean}, {"median", s.median}, {"min", s.min}, {"max", s.max}, {"p95", s.p95},
            {"stddev", optional_number(s.stddev)}};
}

// Every expert (data-)parallel group, each once, in group-rank order.
std::vector<std::vector<int>> all_expert_groups(const MeshShape& mesh, int ep,
                                                std::vector<int> (*group_of)(const MeshShape&, int, int)) {
    std::vector<std::vector<int>> groups;
    for (int rank = 0; rank < mesh.world(); ++rank) {
        std::vector<int> group = group_of(mesh, ep, rank);
        if (group.front() == rank) groups.push_back(std::move(group));
    }
    return groups;
}

nlohmann::json groups_json(const MeshShape& mesh, int ep) {
    nlohmann::json groups = {{"dp", mesh_all_groups(mesh, MeshDimension::dp)},
                             {"tp", mesh_all_groups(mesh, MeshDimension::tp)},
                             {"pp", mesh_all_groups(mesh, MeshDimension::pp)}};
    if (mesh.cp > 1) {
        groups["cp"] = mesh_all_groups(mesh, MeshDimension::cp);
        groups["dp_cp"] = mesh_all_groups(mesh, MeshDimension::dp_cp);
    }
    if (ep > 1) {
        groups["ep"] = all_expert_groups(mesh, ep, mesh_expert_group_ranks);
        groups["edp"] = all_expert_groups(mesh, ep, mesh_expert_data_group_ranks);
    }
    return groups;
}

nlohmann::json memory_json(const MemoryUsage& usage) {
    return {{"params", usage.peak_of(MemoryCategory::params)},
            {"grads", usage.peak_of(MemoryCategory::grads)},
            {"optimizer", usage.peak_of(MemoryCategory::optimizer)},
            {"activations_peak", usage.peak_of(MemoryCategory::activations)},
            {"total_peak", usage.total_peak}};
}

std::string human_count(double value) {
    std::ostringstream text;
    text << std::fixed << std::setprecision(2);
    if (value >= 1e9)
        text << value / 1e9 << "B";
    else if (value >= 1e6)
        text << value / 1e6 << "M";
    else
        text << value / 1e3 << "K";
    return text.str();
}

double mib(const nlohmann::json& bytes) { return bytes.get<double>() / (1024.0 * 1024.0); }

// The buffer-aware theory (theory/memory.hpp, the formula `parbench plan` uses): every buffer
// the engine allocates, from the model, layout and flags alone, for the most loaded rank.
nlohmann::json predicted_memory_json(const TrainSummaryInputs& in, const MemoryUsage& measured) {
    const RankMemory predicted = engine_peak_memory(in.plan.layout);
    nlohmann::json items = nlohmann::json::array();
    for (const MemoryItem& item : predicted.items)
        items.push_back({{"category", memory_category_name(item.category)}, {"name", item.name},
                         {"count", item.count}, {"bytes_each", item.bytes_each}, {"bytes", item.bytes()}});
    const double total = predicted.total();
    const double measured_total = static_cast<double>(measured.total_peak);
    return {{"params", predicted.of(MemoryCategory::params)},
            {"grads", predicted.of(MemoryCategory::grads)},
            {"optimizer", predicted.of(MemoryCategory::optimizer)},
            {"activations", predicted.of(MemoryCategory::activations)},
            {"total", total},
            {"pp_rank", predicted.pp_rank},
            {"relative_error", total > 0 ? (measured_total - total) / total : 0.0},
            {"items", items},
            {"method", "every buffer the engine allocates (parameters, gradients, optimizer state, bucket and gather "
                       "slots, staging shards, activation stores and slots, scratch), counted from the model, layout "
                       "and flags alone by theory/memory.hpp, the formula parbench plan uses; the most loaded rank"}};
}

nlohmann::json activation_json(const TrainSummaryInputs& in) {
    nlohmann::json activation = {{"measured_bytes_per_layer", in.measurements.activation_bytes_per_layer},
                                 {"method", "bytes one layer keeps from forward for backward for one micro-batch, "
                                            "allocated from the ledger (the MLP: the mean over its layers); "
                                            "the largest rank"}};
    if (!in.plan.layout.model.has_sequence()) return activation;
    const ActivationFormula formula = transformer_activation_bytes_per_layer(
        in.plan.layout.model, in.plan.layout.seq_len, in.plan.layout.microbatch_size, in.plan.layout.tensor_split(0),
        in.plan.layout.recompute, in.plan.layout.context_split(0), in.plan.layout.attention);
    activation["recompute"] = recompute_name(in.plan.layout.recompute);
    activation["attention"] = attention_name(in.plan.layout.attention);  // theory/engine_attention.hpp
    activation["formula_bytes_per_layer"] = formula.bytes;
    activation["formula"] = formula.formula;
    if (in.plan.layout.model.moe) {
        const ModelConfig::Moe& moe = *in.plan.layout.model.moe;
        bool any_dense = false;
        for (int layer = 0; layer < in.plan.layout.model.layers; ++layer) any_dense = any_dense || !moe.is_moe_layer(layer);
        activation["measured_layer"] = any_dense ? "dense" : "moe";
    }
    if (in.plan.layout.model.moe)
        activation["moe_note"] = "measured: a dense layer's when the model has one, else an MoE layer's, which keeps "
                                 "moe.memory.kept_bytes_per_layer in place of the SwiGLU's three buffers; the formula "
                                 "is a dense layer's";
    if (!formula.paper_formula.empty()) {
        activation["paper_bytes_per_layer"] = formula.paper_bytes;
        activation["paper_formula"] = formula.paper_formula;
    }
    return activation;
}

double mean_of(const std::vector<double>& values) {
    double sum = 0.0;
    for (double value : values) sum += value;
    return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

// "context" of a context-parallel run: the cp groups, every rank's attention compute, waits
// and traffic (ContextAttention's counters), and the cp comm beside its expected volume.
nlohmann::json context_json(const TrainSummaryInputs& in, const nlohmann::json& comm) {
    const ContextMeasurements& c = *in.measurements.context;
    // max over mean: 1 when every rank does the same work.
    auto imbalance = [](const std::vector<double>& values) {
        const double mean = mean_of(values);
        return mean > 0 ? *std::max_element(values.begin(), values.end()) / mean : 1.0;
    };
    nlohmann::json context = {
        {"cp", in.mesh.cp},
        {"style", context_style_name(in.plan.layout.cp_style)},
        {"balance", context_balance_name(in.plan.layout.cp_balance)},
        {"local_seq_len", in.plan.layout.local_seq_len()},
        {"groups", mesh_all_groups(in.mesh, MeshDimension::cp)},
        {"gradient_groups", mesh_all_groups(in.mesh, MeshDimension::dp_cp)},
        {"gradient_reduction", "averaged over dp x cp = " + std::to_string(in.mesh.dp * in.mesh.cp) +
                                   " ranks in one group (comm.dp_cp), as Megatron-core's data-parallel group with "
                                   "context parallelism"},
        {"cp_rank_of_rank", c.cp_rank},
        {"attention_compute_ms_by_rank", c.compute_ms},
        {"attention_compute_imbalance", imbalance(c.compute_ms)},
        {"attention_scores_by_rank", c.score_elements},
        {"attention_scores_imbalance", imbalance(c.score_elements)},
        {"wait_ms_by_rank", c.wait_ms},
        {"bytes_sent_by_rank", c.bytes_sent},
        {"messages_by_rank", c.messages},
        {"counters_match_expected_all_ranks", c.counters_match_all_ranks},
        {"method", "per timed step, each rank's ContextAttention counters summed over its layers and micro-batches: "
                   "attention_compute_ms the attention math forward and backward, attention_scores the query-key "
                   "pairs it evaluated (masked ones not counted; the work whatever the machine's speed); their "
                   "imbalance, max over mean, shows what --cp-balance none costs under causal masking; wait_ms the time blocked on the cp "
                   "group's transfers as the attention times it, around its calls (comm.exposed_ms.cp is the same "
                   "on the communicator's clock, inside the calls: issue and waits, max over ranks), bytes_sent and messages what the "
                   "rank sent (ring: point-to-point sends; alltoall: all-to-all calls); comm.cp and "
                   "comm.expected_*.cp put the measured cp traffic beside theory/context_traffic.hpp's volume"}};
    // What ContextAttention allocated beside theory/context_parallel.hpp's counts.
    const ContextAttentionFloats formula = context_attention_floats(
        context_local_gqa_shape(in.plan.layout.model, in.plan.layout.microbatch_size, in.plan.layout.local_seq_len(),
                                in.plan.layout.tensor_split(0)),
        in.plan.layout.context_split(0), in.plan.layout.seq_len);
    context["saved_floats_per_layer"] = {{"measured", c.saved_floats}, {"formula", formula.saved}};
    context["workspace_bytes"] = {{"measured", c.workspace_bytes}, {"formula", formula.workspace * sizeof(float)}};
    if (comm["time_ms"].contains("cp")) {
        context["comm_ms"] = comm["time_ms"]["cp"];
        context["exposed_ms"] = comm["exposed_ms"]["cp"];
        context["expected_matches"] = comm["expected_matches"]["cp"];
        context["expected_matches_all_ranks"] = comm["expected_matches_all_ranks"]["cp"];
    }
    return context;
}

// Every rank's attention compute and waits, and the imbalance between them.
void print_context_summary(std::ostream& out, const nlohmann::json& c) {
    char line[256];
    std::snprintf(line, sizeof line, "%-28s cp %d, %s, %s balance, %d tokens per sequence per rank\n",
                  "context parallelism", c["cp"].get<int>(), c["style"].get<std::string>().c_str(),
                  c["balance"].get<std::string>().c_str(), c["local_seq_len"].get<int>());
    out << line;
    auto by_rank = [&](const char* label, const nlohmann::json& values, double scale) {
        std::string text;
        for (const auto& value : values) {
            char number[32];
            std::snprintf(number, sizeof number, " %.3f", value.get<double>() * scale);
            text += number;
        }
        std::snprintf(line, sizeof line, "  %-26s%s\n", label, text.c_str());
        out << line;
    };
    by_rank("attention compute (ms)", c["attention_compute_ms_by_rank"], 1.0);
    by_rank("attention scores (M)", c["attention_scores_by_rank"], 1e-6);
    std::snprintf(line, sizeof line, "  %-26s %.3f in scores, %.3f in time (max over mean of the ranks')\n",
                  "attention imbalance", c["attention_scores_imbalance"].get<double>(),
                  c["attention_compute_imbalance"].get<double>());
    out << line;
    by_rank("waits, exposed (ms)", c["wait_ms_by_rank"], 1.0);
    by_rank("sent (MB)", c["bytes_sent_by_rank"], 1e-6);
}

// "moe" of a model with MoE layers: its routing settings, per MoE layer the step's routing
// (tokens per expert, drops, balancing loss) and all-to-alls, and its memory against
// theory/moe_memory.hpp.
nlohmann::json moe_json(const TrainSummaryInputs& in) {
    const MoeMeasurements& m = *in.measurements.moe;
    const ModelConfig::Moe& config = *in.plan.layout.model.moe;
    const Layout& l = in.plan.layout;
    nlohmann::json layers = nlohmann::json::array();
    for (const MoeLayerMeasurement& layer : m.layers) {
        const auto& tokens = layer.tokens_per_expert;
        double sum = 0.0, low = tokens.empty() ? 0.0 : tokens.front(), high = low;
        for (double t : tokens) {
            sum += t;
            low = std::min(low, t);
            high = std::max(high, t);
        }
        const double mean = tokens.empty() ? 0.0 : sum / static_cast<double>(tokens.size());
        // The counts' alltoall blocks: all of it is exposed.
        const double exposed_ms = layer.dispatch_exposed_ms + layer.combine_exposed_ms + layer.counts_ms;
        layers.push_back({{"layer", layer.layer},
                          {"tokens_per_expert", tokens},
                          {"tokens_per_expert_min", low},
                          {"tokens_per_expert_mean", mean},
                          {"tokens_per_expert_max", high},
                          {"imbalance", mean > 0.0 ? nlohmann::json(high / mean) : nlohmann::json(nullptr)},
                          {"routed", layer.routed},
                          {"dropped", layer.dropped},
                          {"aux_loss", layer.aux_loss},
                          {"dispatch_ms", layer.dispatch_ms},
                          {"combine_ms", layer.combine_ms},
                          {"counts_ms", layer.counts_ms},
                          {"dispatch_exposed_ms", layer.dispatch_exposed_ms},
                          {"combine_exposed_ms", layer.combine_exposed_ms},
                          {"exposed_ms", exposed_ms},
                          {"dispatch_bytes", layer.dispatch_bytes},
                          {"combine_bytes", layer.combine_bytes}});
    }
    return {
        {"experts", config.experts},
        {"top_k", config.top_k},
        {"shared_experts", config.shared_experts},
        {"router", config.score == MoeScore::sigmoid ? "sigmoid" : "softmax"},
        {"ep", l.ep},
        {"capacity_factor", optional_number(l.moe.capacity_factor)},
        {"dropless", !l.moe.capacity_factor},
        {"aux_loss_coeff", l.moe.aux_loss_coeff},
        {"bias_update_rate", l.moe.bias_update_rate},
        {"a2a_overlap", l.moe.a2a_overlap},
        {"a2a_overlap_1f1b", l.moe.a2a_overlap_1f1b},
        {"routing_group", "one micro-batch on one data-parallel rank: the capacity and the balancing loss count "
                          "over its tokens"},
        {"mfu_basis", "active parameters (flops.formula): the router and the experts a token runs"},
        {"layers", layers},
        {"method", "per timed step (mean over steps): tokens per expert, routed and dropped assignments over the "
                   "global batch; aux_loss the mean over routing groups of L_aux (alpha included); dispatch, "
                   "combine (forward and the backward's mirror) and the row-count alltoall: this rank's "
                   "expert-parallel calls, max over ranks; a blocking call's *_ms is its duration, an overlapped "
                   "half's (--moe-a2a-overlap) or a paired pass's exchange (--moe-a2a-overlap-1f1b) runs from its issue to "
                   "the test or wait that saw it complete; "
                   "*_exposed_ms is the host's time blocked in them (a blocking call's whole duration, an overlapped "
                   "half's or paired exchange's issue, polls and wait), exposed_ms their sum with the counts' blocking alltoall"},
        {"memory",
         {{"kept_bytes_per_layer", {{"measured", m.kept_bytes_measured}, {"formula", m.kept_bytes_formula}}},
          {"scratch_bytes", {{"measured", m.scratch_bytes_measured}, {"formula", m.scratch_bytes_formula}}},
          {"dispatch_buffer_bytes_per_layer", m.dispatch_buffer_bytes_formula},
          {"matches", m.kept_bytes_measured == m.kept_bytes_formula &&
                          m.scratch_bytes_measured == m.scratch_bytes_formula},
          {"formula", "theory/moe_memory.hpp: kept per MoE layer and micro-batch (router scores, routing, dispatch "
                      "and combine buffers, expert activations), scratch once per model"}}},
    };
}

void print_moe_summary(std::ostream& out, const nlohmann::json& moe) {
    char line[320];
    const std::string capacity =
        moe["dropless"].get<bool>() ? "dropless" : "capacity factor " + moe["capacity_factor"].dump();
    std::snprintf(line, sizeof line, "%-28s %d experts, top %d, %s router, ep %d, %s\n", "mixture of experts",
                  moe["experts"].get<int>(), moe["top_k"].get<int>(), moe["router"].get<std::string>().c_str(),
                  moe["ep"].get<int>(), capacity.c_str());
    out << line;
    for (const auto& layer : moe["layers"]) {
        char imbalance[32] = "-";
        if (!layer["imbalance"].is_null()) std::snprintf(imbalance, sizeof imbalance, "%.3f", layer["imbalance"].get<double>());
        std::snprintf(line, sizeof line,
                      "  layer %-3d tokens/expert %.0f/%.1f/%.0f (min/mean/max, imbalance %s), dropped %.0f, "
                      "aux loss %.4g, dispatch %.3f ms %.3g MB, combine %.3f ms %.3g MB, exposed %.3f ms%s\n",
                      layer["layer"].get<int>(), layer["tokens_per_expert_min"].get<double>(),
                      layer["tokens_per_expert_mean"].get<double>(), layer["tokens_per_expert_max"].get<double>(),
                      imbalance, layer["dropped"].get<double>(), layer["aux_loss"].get<double>(),
                      layer["dispatch_ms"].get<double>(), layer["dispatch_bytes"].get<double>() / 1e6,
                      layer["combine_ms"].get<double>(), layer["combine_bytes"].get<double>() / 1e6,
                      layer["exposed_ms"].get<double>(), moe["a2a_overlap"].get<bool>()        ? " (overlapped)"
                      : moe.value("a2a_overlap_1f1b", false) ? " (overlapped across micro-batches)"
                                                              : "");
        out << line;
    }
    const auto& memory = moe["memory"];
    std::snprintf(line, sizeof line, "  %-26s %.4g MiB per MoE layer measured, %.4g formula; scratch %.4g / %.4g\n",
                  "MoE buffers", memory["kept_bytes_per_layer"]["measured"].get<double>() / 1048576.0,
                  memory["kept_bytes_per_layer"]["formula"].get<double>() / 1048576.0,
                  memory["scratch_bytes"]["measured"].get<double>() / 1048576.0,
                  memory["scratch_bytes"]["formula"].get<double>() / 1048576.0);
    out << line;
}

}  // namespace

std::string scheme_name(const TrainPlan& plan) {
    if (plan.layout.zero == 0) return "ddp";
    return "zero" + std::to_string(plan.layout.zero);
}

namespace {

// train_result_json's parts: the model and layout trained, the step's rates, the memory, and the
// check against the serial reference.

// The model's config, its parameter count and the sequence length trained.
nlohmann::json trained_model_json(const TrainSummaryInputs& in) {
    nlohmann::json model = to_json(in.plan.layout.model);
    model["parameters"] = in.measurements.parameters;
    model["shape"]["seq_len_trained"] = in.plan.layout.seq_len;
    return model;
}

// The degrees as the mesh ran them, and the layout's options.
nlohmann::json layout_result_json(const TrainSummaryInputs& in) {
    const TrainOptions& o = in.plan.options;
    const Layout& l = in.plan.layout;
    return {{"dp", in.mesh.dp},
            {"tp", in.mesh.tp},
            {"pp", in.mesh.pp},
            {"sp", l.sp},
            {"tp_style", o.layout.tp_style},
            {"zero", in.plan.layout.zero},
            {"scheme", in.scheme_name},
            {"schedule", "none"},
            {"microbatches", l.microbatches},
            {"microbatch_size", in.plan.layout.microbatch_size},
            {"overlap", l.overlap},
            {"prefetch", l.prefetch},
            {"recompute", recompute_name(in.plan.layout.recompute)},
            {"cp", in.mesh.cp},
            {"ep", l.ep},
            {"etp", l.etp},
            {"cp_style", in.mesh.cp > 1 ? nlohmann::json(context_style_name(in.plan.layout.cp_style)) : nlohmann::json(nullptr)},
            {"cp_balance",
             in.mesh.cp > 1 ? nlohmann::json(context_balance_name(in.plan.layout.cp_balance)) : nlohmann::json(nullptr)},
            {"bucket_mb", static_cast<double>(in.plan.layout.bucket_bytes) / (1024.0 * 1024.0)},
            {"bucket_source", in.plan.layout.bucket_source},
            {"groups", groups_json(in.mesh, l.ep)}};
}

// Step time, throughput and FLOP rates (MFU, HFU), over the median step.
void add_step_rates(nlohmann::json& result, const TrainSummaryInputs& in) {
    const Layout& l = in.plan.layout;
    const TrainMeasurements& m = in.measurements;
    const Summary step = summarize(m.step_ms);
    // Throughput is named for what it counts: tokens for a sequence model, samples for the MLP.
    const bool counts_tokens = in.plan.layout.model.has_sequence();
    const double samples_per_step = static_cast<double>(l.global_batch);
    const double tokens_per_step = samples_per_step * in.plan.layout.seq_len;
    const double flops = model_flops_per_step(in.plan.layout.model, l.global_batch, in.plan.layout.seq_len);
    const double median_s = step.median / 1000.0;
    const double achieved_tflops = flops / median_s / static_cast<double>(in.mesh.world()) / 1e12;
    const double hardware_flops =
        flops + recompute_flops_per_step(in.plan.layout.model, l.global_batch, in.plan.layout.seq_len, in.plan.layout.recompute);
    const double hardware_tflops = hardware_flops / median_s / static_cast<double>(in.mesh.world()) / 1e12;
    result["samples_per_step"] = samples_per_step;
    result["step_time_ms"] = summary_json(step);
    result["step_time_samples_ms"] = m.step_ms;
    result["samples_per_s"] = samples_per_step / median_s;
    result["throughput"] = {{"value", (counts_tokens ? tokens_per_step : samples_per_step) / median_s},
                            {"unit", counts_tokens ? "tokens/s" : "samples/s"}};
    result["throughput_basis"] = "median step time";
    result["flops"] = {{"per_step", flops},
                       {"formula", flops_formula(in.plan.layout.model)},
                       {"causal_discount", false},
                       {"recompute", recompute_name(in.plan.layout.recompute)},
                       {"hardware_per_step", hardware_flops}};
    result["achieved_tflops_per_rank"] = achieved_tflops;
    result["peak_tflops_per_rank"] = optional_number(in.peak.tflops);
    result["peak_source"] = in.peak.source;
    result["mfu"] = in.peak.tflops ? nlohmann::json(achieved_tflops / *in.peak.tflops) : nlohmann::json(nullptr);
    result["hfu"] = in.peak.tflops ? nlohmann::json(hardware_tflops / *in.peak.tflops) : nlohmann::json(nullptr);
    if (counts_tokens) {
        result["tokens_per_step"] = tokens_per_step;
        result["tokens_per_s"] = tokens_per_step / median_s;
    }
}

// Memory: each rank's measured, the largest's (ranks differ only by padding), ZeRO's model states
// and every buffer predicted.
void add_memory_results(nlohmann::json& result, const TrainSummaryInputs& in) {
    const TrainMeasurements& m = in.measurements;
    MemoryUsage largest;
    for (const MemoryUsage& usage : m.memory_by_rank)
        if (usage.total_peak >= largest.total_peak) largest = usage;
    nlohmann::json by_rank = nlohmann::json::array();
    for (const MemoryUsage& usage : m.memory_by_rank) by_rank.push_back(memory_json(usage));
    const ModelStates theory =
        zero_theoretical_memory(m.parameters_per_rank, in.mesh.dp * in.mesh.cp, in.plan.layout.zero);
    result["memory_bytes"] = memory_json(largest);
    result["memory_bytes_by_rank"] = by_rank;
    result["memory_method"] = "device buffers allocated by the engine, tagged by category (peak per category; "
                              "total_peak is the peak of the sum); the largest rank";
    result["memory_theoretical_bytes"] = {
        {"params", theory.params},
        {"grads", theory.grads},
        {"optimizer", theory.optimizer},
        {"total", theory.total()},
        {"convention", "ZeRO (arXiv 1910.02054) model states for fp32 Adam: 4 + 4 + 8 = 16 B/param of this "
                       "rank's tensor-parallel shard, divided by dp (dp x cp under context parallelism) per stage; "
                       "activations and buffers not included"}};
    result["memory_predicted_bytes"] = predicted_memory_json(in, largest);
}

// The report's comm_method: what comm.<dim> and its times count.
constexpr const char* comm_method =
    "by parallel dimension (dp, tp, pp; groups of one rank issue nothing and are left out; "
    "under --sp the tp group carries sequence parallelism's collectives too; under --cp, cp is the "
    "context-parallel attention's transfers (context.wait_ms_by_rank: its own count of its waits) "
    "and dp_cp the dp x cp group the gradients are averaged over, in place of dp). "
    "comm.<dim>: the reported rank's group, per timed step: calls, bytes (nccl-tests' size "
    "convention), time_ms (host time from each call's start to its completion: a blocking "
    "call's duration, a non-blocking one's issue to the wait or test that saw it complete) and "
    "blocked_ms (the part the host was blocked: blocking calls whole, non-blocking ones' issue "
    "plus waits and tests). comm.time_ms and comm.exposed_ms: per dimension, max over ranks "
    "per step, mean over timed steps, of the time with at least one of the group's calls in "
    "flight (the union of their times, <= step time) and of the exposed part: the blocked time, less for pp the part of each transfer's wait before the peer issued its "
    "side (waiting for a peer still computing is bubble, not communication; docs/pipeline.md). "
    "expected: the traffic the layout implies for each rank from the layers it holds "
    "(src/theory/traffic.hpp; docs/training.md), for the reported rank and checked on every rank";

// An MoE check's routing: the run's decisions the reference followed, and each
// token's flip.
nlohmann::json routing_check_json(const RoutingComparison& routing, int global_batch) {
    nlohmann::json flips = nlohmann::json::array();
    for (const RoutingFlip& flip : routing.flips)
        flips.push_back({{"layer", flip.layer},
                         {"sample", flip.sample},
                         {"step", flip.sample / static_cast<std::uint64_t>(global_batch)},
                         {"position", flip.position},
                         {"margin", flip.margin},
                         {"near_tie", flip.margin <= routing.near_tie}});
    return {
        {"followed", routing.followed},
        {"not_followed", routing.followed ? nlohmann::json() : nlohmann::json(routing.not_followed)},
        {"decisions", routing.decisions},
        {"flips", flips},
        {"near_tie", routing.near_tie},
        {"method", "the serial reference takes the run's routing decisions; a flip is a token whose own top-k "
                   "differed, its margin the score its own experts had over the run's (with the balancing "
                   "bias); a near-tie (margin <= the parameters' tolerance) passes, any other flip fails"},
        {"passed", routing.passed()}};
}

// The run against the serial reference: loss and parameters within their tolerances.
nlohmann::json check_json(const CheckResult& check, int global_batch) {
    nlohmann::json result = {
        {"max_rel_diff_loss", check.max_rel_diff_loss},
        {"rel_diff_loss", check.rel_diff_loss},
        {"loss_over_tolerance", check.loss_over_tolerance},
        {"max_rel_diff_params", check.max_rel_diff_params},
        {"tolerance", {{"loss", check.tolerance_loss}, {"params", check.tolerance_params}}},
        {"worst_tensor", check.worst_tensor},
        {"method", "loss: per step, |parallel - serial| / |serial| within that step's tolerance; params: max over tensors "
                   "of ||parallel - serial||_2 / ||serial||_2 over the elements whose gradient is "
                   "not zero by construction; those (zero_gradient) element by element, within "
                   "2 Adam steps per step (train/reference_check.hpp)"},
        {"zero_gradient",
         {{"elements", check.zero_gradient_elements},
          {"max_abs_diff", check.max_abs_diff_zero_gradient},
          {"tolerance", check.tolerance_zero_gradient}}},
        {"reference", "the same model, seed, data and global batch on a world of one (serial)"},
        {"passed", check.passed}};
    if (check.routing) result["routing"] = routing_check_json(*check.routing, global_batch);
    return result;
}

}  // namespace

nlohmann::json train_result_json(const TrainSummaryInputs& in) {
    const TrainOptions& o = in.plan.options;
    const Layout& l = in.plan.layout;
    const TrainMeasurements& m = in.measurements;
    const nlohmann::json comm = comm_result_json(in);
    const nlohmann::json stragglers = straggler_json(m, in.mesh);
    nlohmann::json result = {
        {"model", trained_model_json(in)},
        {"layout", layout_result_json(in)},
        {"precision", precision_name(l.precision)},
        {"global_batch", l.global_batch},
        {"seq_len", in.plan.layout.seq_len},
        {"warmup", o.warmup},
        {"steps", o.steps},
        {"timing", "barrier, step (forward + backward of every micro-batch, gradient collectives, optimizer), "
                   "device sync; each step's time is the max over ranks"},
        {"passes_by_rank", passes_json(m)},
        {"activation_memory", activation_json(in)},
        {"comm", comm},
        {"comm_method", comm_method},
        {"exposed_comm_ms", summarize(m.exposed_comm_ms).mean},
        {"exposed_comm_method", "per step, each rank's exposed communication summed over the dimensions "
                                "(comm.exposed_ms), max over ranks, mean over timed steps; <= step time"},
        {"stragglers", stragglers},
        {"loss", m.loss},
        {"loss_steps", "every step in order, the first `warmup` of them warm-up; mean over the global batch"},
    };
    add_step_rates(result, in);
    add_memory_results(result, in);
    if (in.check) result["check"] = check_json(*in.check, l.global_batch);
    if (m.pipeline) add_pipeline_results(result, in.plan, in.mesh, *m.pipeline, m.memory_by_rank);
    if (m.context) result["context"] = context_json(in, comm);
    if (m.moe) result["moe"] = moe_json(in);
    result["thread_counters"] = thread_counters_json(
        m.counters_by_rank, m.step_ms.size(), "the timed steps, each from just before to just after its step; calls = steps");
    result["warnings"] = train_warnings(m);
    for (const std::string& warning : straggler_warnings(stragglers, in.mesh)) result["warnings"].push_back(warning);
    return result;
}

std::vector<std::string> train_warnings(const TrainMeasurements& measurements) {
    std::vector<std::string> warnings;
    for (const std::string& warning : sample_warnings(measurements.step_ms, SampleFlags{"--steps", "--warmup"}))
        warnings.push_back("step times: " + warning);
    for (const Warning& warning : thread_counter_warnings(measurements.counters_by_rank, measurements.step_ms.size(), "step"))
        warnings.push_back("step overheads: " + warning.text);
    return warnings;
}

void print_train_header(std::ostream& out, const TrainPlan& plan, const MeshShape& mesh, std::size_t parameters,
                        const std::string& device_kind) {
    const TrainOptions& o = plan.options;
    const Layout& l = plan.layout;
    const ModelConfig& c = plan.layout.model;
    out << "# parbench train: " << c.name << " (" << model_kind_name(c.kind) << ", "
        << human_count(static_cast<double>(parameters)) << " parameters: " << c.layers << " layers, hidden "
        << c.hidden;
    if (c.has_sequence()) out << ", " << c.heads << " heads, seq " << plan.layout.seq_len << ", vocab " << c.vocab;
    if (c.kind == ModelKind::llama) out << ", " << c.kv_heads << " kv heads, ffn " << c.ffn_hidden;
    out << ")\n";
    out << "# layout: dp " << mesh.dp << " x tp " << mesh.tp;
    if (mesh.tp > 1) out << " (" << o.layout.tp_style << (l.sp ? ", sequence parallel" : "") << ")";
    out << " x pp " << mesh.pp;
    if (mesh.cp > 1)
        out << " x cp " << mesh.cp << " (" << context_style_name(plan.layout.cp_style) << ", "
            << context_balance_name(plan.layout.cp_balance) << " balance, " << plan.layout.local_seq_len()
            << " tokens of each sequence per rank; gradients over dp x cp)";
    out << ", "
        << (plan.layout.zero == 0 ? std::string("DDP") : "ZeRO-" + std::to_string(plan.layout.zero));
    if (l.overlap) out << ", overlapped gradient collectives";
    if (l.prefetch) out << ", prefetch";
    out << "; global batch " << l.global_batch << " = " << mesh.dp << " ranks x " << l.microbatches
        << " micro-batches x " << plan.layout.microbatch_size << "; " << precision_name(l.precision) << " on "
        << device_kind << "\n";
    out << "# method: " << o.warmup << " warm-up + " << o.steps
        << " timed steps; barrier, step, device sync; each step's time is the max over ranks\n";
}

namespace {

// --check's routing half: one line per flip (the first ten), then whether the reference followed.
void print_routing_check(std::ostream& out, const nlohmann::json& routing) {
    if (!routing["followed"].get<bool>()) {
        out << "  routing: the reference routed on its own (" << routing["not_followed"].get<std::string>() << ")\n";
        return;
    }
    const auto& flips = routing["flips"];
    out << "  routing: the reference followed the run's " << routing["decisions"].get<std::uint64_t>()
        << " decisions; its own top-k differed at " << flips.size() << '\n';
    constexpr std::size_t shown = 10;
    for (std::size_t i = 0; i < flips.size() && i < shown; ++i) {
        const auto& flip = flips[i];
        char line[200];
        const bool near_tie = flip["near_tie"].get<bool>();
        std::snprintf(line, sizeof line,
                      "  routing flip: step %llu, layer %d, sample %llu token %d: margin %.2e %s %.0e (%s)\n",
                      static_cast<unsigned long long>(flip["step"].get<std::uint64_t>()) + 1, flip["layer"].get<int>(),
                      static_cast<unsigned long long>(flip["sample"].get<std::uint64_t>()), flip["position"].get<int>(),
                      flip["margin"].get<double>(), near_tie ? "<=" : ">", routing["near_tie"].get<double>(),
                      near_tie ? "near-tie, not a failure" : "FAILED");
        out << line;
    }
    if (flips.size() > shown) out << "  routing: " << flips.size() - shown << " more flips in the report\n";
}

// print_train_summary's blocks, top to bottom.

// Step time, throughput, TFLOP/s, MFU and (under recompute) HFU.
void print_step_rates(std::ostream& out, const nlohmann::json& r) {
    const auto& t = r["step_time_ms"];
    char line[1024];
    std::snprintf(line, sizeof line, "%-28s %10s %10s %10s %10s %10s\n", "step time (ms)", "median", "mean", "min",
                  "max", "p95");
    out << line;
    std::snprintf(line, sizeof line, "%-28s %10.3f %10.3f %10.3f %10.3f %10.3f\n", "", t["median"].get<double>(),
                  t["mean"].get<double>(), t["min"].get<double>(), t["max"].get<double>(), t["p95"].get<double>());
    out << line;
    std::snprintf(line, sizeof line, "%-28s %.1f\n", r["throughput"]["unit"].get<std::string>().c_str(),
                  r["throughput"]["value"].get<double>());
    out << line;
    std::snprintf(line, sizeof line, "%-28s %.4g (model FLOPs/step %.4g)\n", "achieved TFLOP/s per rank",
                  r["achieved_tflops_per_rank"].get<double>(), r["flops"]["per_step"].get<double>());
    out << line;
    if (r["mfu"].is_null())
        out << "MFU                          unknown (no peak for this device; give --peak-tflops)\n";
    else {
        // A mixture of experts counts the parameters a token runs (theory/moe_active_flops.hpp).
        const std::string basis = r.contains("moe") ? "; active parameters" : "";
        std::snprintf(line, sizeof line, "%-28s %.1f%% of %.4g TFLOP/s (%s%s)\n", "MFU", 100.0 * r["mfu"].get<double>(),
                      r["peak_tflops_per_rank"].get<double>(), r["peak_source"].get<std::string>().c_str(),
                      basis.c_str());
        if (r["flops"]["recompute"] != "none") {
            out << line;
            std::snprintf(line, sizeof line,
                          "%-28s %.1f%% (hardware FLOPs/step %.4g: --recompute %s adds its forward)\n", "HFU",
                          100.0 * r["hfu"].get<double>(), r["flops"]["hardware_per_step"].get<double>(),
                          r["flops"]["recompute"].get<std::string>().c_str());
        }
        out << line;
    }
}

// Measured memory against the two theories, the gradient bucket and the activations per layer.
void print_memory_summary(std::ostream& out, const nlohmann::json& r) {
    char line[1024];
    const auto& mem = r["memory_bytes"];
    const auto& theory = r["memory_theoretical_bytes"];
    std::snprintf(line, sizeof line, "%-28s %10s %10s %10s %10s %10s\n", "memory per rank (MiB)", "params", "grads",
                  "optimizer", "activ.", "total");
    out << line;
    std::snprintf(line, sizeof line, "%-28s %10.2f %10.2f %10.2f %10.2f %10.2f\n", "  measured (peak)",
                  mib(mem["params"]), mib(mem["grads"]), mib(mem["optimizer"]), mib(mem["activations_peak"]),
                  mib(mem["total_peak"]));
    out << line;
    std::snprintf(line, sizeof line, "%-28s %10.2f %10.2f %10.2f %10s %10.2f\n", "  theory (ZeRO, 16 B/param)",
                  mib(theory["params"]), mib(theory["grads"]), mib(theory["optimizer"]), "-", mib(theory["total"]));
    out << line;
    const auto& predicted = r["memory_predicted_bytes"];
    std::snprintf(line, sizeof line, "%-28s %10.2f %10.2f %10.2f %10.2f %10.2f  (measured %+.2f%%)\n",
                  "  theory (every buffer)", mib(predicted["params"]), mib(predicted["grads"]),
                  mib(predicted["optimizer"]), mib(predicted["activations"]), mib(predicted["total"]),
                  100.0 * predicted["relative_error"].get<double>());
    out << line;
    if (r["layout"]["scheme"] != "zero3") {
        std::snprintf(line, sizeof line, "%-28s %.4g MiB (%s)\n", "gradient bucket", r["layout"]["bucket_mb"].get<double>(),
                      r["layout"]["bucket_source"].get<std::string>().c_str());
        out << line;
    }
    const auto& activation = r["activation_memory"];
    if (activation.contains("formula_bytes_per_layer")) {
        std::snprintf(line, sizeof line, "%-28s %.4g MiB measured, %.4g MiB formula", "activations per layer",
                      mib(activation["measured_bytes_per_layer"]), mib(activation["formula_bytes_per_layer"]));
        out << line;
        if (activation.contains("paper_bytes_per_layer")) {
            std::snprintf(line, sizeof line, ", %.4g MiB paper (16-bit)", mib(activation["paper_bytes_per_layer"]));
            out << line;
        }
        // Every layer of the model an MoE layer: the measured figure is one, the formula a
        // dense layer's, so they differ by design; say so rather than leave a mismatch unexplained.
        if (activation.value("measured_layer", "") == "moe")
            out << "\n" << std::string(29, ' ')
                << "(measured: an MoE layer, which keeps its experts' buffers (MoE buffers above) in place of the "
                   "MLP's; the formulas count a dense layer)";
        out << "\n";
    }
}

// The loss over the run, and the check against the serial reference.
void print_loss_and_check(std::ostream& out, const nlohmann::json& r) {
    char line[1024];
    const auto& loss = r["loss"];
    std::snprintf(line, sizeof line, "%-28s %.5f -> %.5f over %zu steps\n", "loss", loss.front().get<double>(),
                  loss.back().get<double>(), loss.size());
    out << line;
    if (r.contains("check")) {
        const auto& c = r["check"];
        // The tensor of the largest difference; none when every parameter is equal to the bit.
        const std::string worst = c["worst_tensor"].get<std::string>();
        const std::string where = worst.empty() ? "every tensor equal" : "largest in " + worst;
        std::snprintf(line, sizeof line, "%-28s %s (loss %.2e <= %.0e, params %.2e <= %.0e, %s)\n",
                      "check vs serial", c["passed"].get<bool>() ? "passed" : "FAILED",
                      c["max_rel_diff_loss"].get<double>(), c["tolerance"]["loss"].get<double>(),
                      c["max_rel_diff_params"].get<double>(), c["tolerance"]["params"].get<double>(), where.c_str());
        out << line;
        if (c.contains("routing")) print_routing_check(out, c["routing"]);
    }
}

}  // namespace

void print_train_summary(std::ostream& out, const nlohmann::json& r) {
    print_step_rates(out, r);
    print_comm_summary(out, r);
    if (r.contains("context")) print_context_summary(out, r["context"]);
    if (r.contains("moe")) print_moe_summary(out, r["moe"]);
    print_memory_summary(out, r);
    print_loss_and_check(out, r);
}

}  // namespace parbench

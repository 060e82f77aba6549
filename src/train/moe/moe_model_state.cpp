#include "train/moe/moe_model_state.hpp"

#include <algorithm>
#include <stdexcept>

#include "theory/moe_buffers.hpp"

namespace parbench {

MoeMemoryShape model_moe_shape(const ModelConfig& config, int rows, const MoeContext& context) {
    const ModelConfig::Moe& moe = *config.moe;
    return MoeMemoryShape{static_cast<std::size_t>(rows),
                          static_cast<std::size_t>(config.hidden),
                          static_cast<std::size_t>(moe.experts),
                          static_cast<std::size_t>(moe.top_k),
                          static_cast<std::size_t>(moe.expert_hidden),
                          static_cast<std::size_t>(moe.shared_experts),
                          static_cast<std::size_t>(context.expert_group ? context.expert_group->size() : 1),
                          moe.activation,
                          static_cast<std::size_t>(context.expert_tensor_group ? context.expert_tensor_group->size() : 1)};
}

MoeModelState::MoeModelState(const ModelConfig& config, const MoeContext& context, int microbatches,
                             const std::vector<int>& held_layers, Device& device)
    : experts_(config.moe ? config.moe->experts : 0), context_(context), device_(device), layers_(held_layers) {
    for (int layer : layers_) {
        index_[layer] = static_cast<int>(stats_.size());
        stats_.push_back(empty_stats());
        bias_.emplace_back(static_cast<std::size_t>(experts_), 0.0f);
        routed_.emplace_back(static_cast<std::size_t>(experts_), 0.0);
    }
    aux_losses_.assign(static_cast<std::size_t>(microbatches) * layers_.size(), 0.0);
    first_samples_.assign(static_cast<std::size_t>(microbatches), 0);
}

void MoeModelState::stage(int microbatch, std::uint64_t first_sample) {
    first_samples_.at(static_cast<std::size_t>(microbatch)) = first_sample;
}

MoeLayerStats MoeModelState::empty_stats() const {
    MoeLayerStats stats;
    stats.tokens_per_expert.assign(static_cast<std::size_t>(experts_), 0);
    return stats;
}

void MoeModelState::forward(MoeLayer& moe, int layer, int microbatch, bool recomputing, float* out,
                            const MoeActivations& a, const float* x, const MoeWeights& w) {
    // A recomputing forward routes as the first did (the same inputs): the reference, which keeps
    // every activation, follows each decision once, and the run records it once.
    const RoutingKey key{layer, first_samples_.at(static_cast<std::size_t>(microbatch))};
    RoutingHold hold;
    std::vector<int> taken;
    std::vector<GroupFlip> flips;
    if (context_.follow_routing != nullptr) {
        hold.follow = context_.follow_routing->decisions(key).data();
        hold.flips = &flips;
    } else if (context_.record_routing != nullptr && !recomputing) {
        hold.taken = &taken;
    }
    const MoeForwardResult routed = moe.forward(out, a, x, w, bias(layer), exchange(layer), hold);
    if (!recomputing) count(layer, microbatch, routed);
    if (context_.follow_routing != nullptr && !recomputing)
        context_.follow_routing->followed(key, moe.router_shape().tokens, flips);
    if (hold.taken != nullptr) context_.record_routing->record(key, std::move(taken));
}

void MoeModelState::backward(MoeLayer& moe, MoeGradientPack& pack, int layer, float* dx, const MoeGradients& whole,
                             const float* dout, const MoeActivations& a, const float* x, const MoeWeights& w, int rows,
                             float loss_scale) {
    // alpha · rows · loss_scale: the balancing loss's weight in the step loss.
    const double balance_weight = context_.settings.aux_loss_coeff * static_cast<double>(rows) * loss_scale;
    moe.backward(dx, pack.begin(whole), dout, a, x, w, balance_weight, exchange(layer));
    pack.finish(whole);
}

void MoeModelState::count(int layer, int microbatch, const MoeForwardResult& result) {
    const std::size_t i = index(layer);
    MoeLayerStats& stats = stats_[i];
    std::vector<double>& routed = routed_[i];
    const RoutingCounts& counts = result.counts;
    for (std::size_t e = 0; e < counts.kept.size(); ++e) {
        stats.tokens_per_expert[e] += counts.kept[e];
        stats.routed += counts.routed[e];
        routed[e] += counts.routed[e];
    }
    stats.dropped += counts.dropped;
    stats.aux_loss += result.aux_loss;
    ++stats.groups;
    aux_losses_.at(static_cast<std::size_t>(microbatch) * layers_.size() + i) = result.aux_loss;
}

double MoeModelState::auxiliary_loss(int microbatch) const {
    double sum = 0.0;
    for (std::size_t i = 0; i < layers_.size(); ++i)
        sum += aux_losses_.at(static_cast<std::size_t>(microbatch) * layers_.size() + i);
    return sum;
}

// DeepSeek-V3's auxiliary-loss-free balancing (arXiv 2412.19437 sec. 2.1.2; Wang et al.,
// arXiv 2408.15664): after each step every expert's bias moves by u towards balance,
// b_e += u · sign(mean load - load_e), the loads being the step's chosen assignments over
// the balance group, so every replica moves its biases alike.
std::vector<MoeLayerStats> MoeModelState::finish_step() {
    const double rate = context_.settings.bias_update_rate;
    if (rate > 0.0 && !routed_.empty()) {
        std::vector<double> loads;
        for (const std::vector<double>& layer : routed_) loads.insert(loads.end(), layer.begin(), layer.end());
        if (context_.balance_group != nullptr && context_.balance_group->size() > 1) {
            // Summed in the device's memory: an NCCL group reads none of the host's.
            const std::size_t bytes = loads.size() * sizeof(double);
            if (loads_.bytes() < bytes) loads_ = device_.allocate(bytes);
            device_.copy_from_host(loads_, loads.data(), bytes);
            context_.balance_group->allreduce(loads_.data(), loads_.data(), loads.size(), DType::float64,
                                              ReduceOp::sum);
            device_.copy_to_host(loads.data(), loads_, bytes);
        }
        const std::size_t E = routed_.front().size();
        for (std::size_t i = 0; i < bias_.size(); ++i) {
            double mean = 0.0;
            for (std::size_t e = 0; e < E; ++e) mean += loads[i * E + e];
            mean /= static_cast<double>(E);
            for (std::size_t e = 0; e < E; ++e) {
                const double load = loads[i * E + e];
                const float step = static_cast<float>(rate);
                bias_[i][e] += load < mean ? step : (load > mean ? -step : 0.0f);
            }
        }
    }
    std::vector<MoeLayerStats> finished = stats_;
    for (MoeLayerStats& stats : stats_) stats = empty_stats();
    for (std::vector<double>& layer : routed_) std::fill(layer.begin(), layer.end(), 0.0);
    return finished;
}

namespace {

// The pack's tensors, in MoeGradients' order (theory/moe_buffers.hpp, which the theory sums).
std::array<std::size_t, 7> gradient_sizes(const MoeMemoryShape& s) {
    const MoeGradientPackBuffers b = moe_gradient_pack_buffers(s);
    return {b.router, b.experts_gate, b.experts_up, b.experts_down, b.shared_gate, b.shared_up, b.shared_down};
}

std::array<float*, 7> pointers(const MoeGradients& g) {
    return {g.router, g.experts_gate, g.experts_up, g.experts_down, g.shared_gate, g.shared_up, g.shared_down};
}

}  // namespace

void MoeGradientPack::allocate(ActivationArena& arena, const MoeMemoryShape& shape) {
    if (!tp_.sequence_parallel()) return;
    sizes_ = gradient_sizes(shape);
    std::size_t total = 0;
    for (std::size_t n : sizes_) total += n;
    pack_ = arena.floats(total);
}

MoeGradients MoeGradientPack::begin(const MoeGradients& whole) {
    if (!tp_.sequence_parallel()) return whole;
    std::size_t total = 0;
    for (std::size_t n : sizes_) total += n;
    ops_.fill(pack_, 0.0f, total);
    std::array<float*, 7> in_pack{};
    const std::array<float*, 7> wholes = pointers(whole);
    float* next = pack_;
    for (std::size_t i = 0; i < sizes_.size(); ++i) {
        in_pack[i] = wholes[i] ? next : nullptr;
        next += sizes_[i];
    }
    return MoeGradients{in_pack[0], in_pack[1], in_pack[2], in_pack[3], in_pack[4], in_pack[5], in_pack[6]};
}

void MoeGradientPack::finish(const MoeGradients& whole) {
    if (!tp_.sequence_parallel()) return;
    std::size_t total = 0;
    for (std::size_t n : sizes_) total += n;
    tp_.allreduce_sum(pack_, total);
    const std::array<float*, 7> wholes = pointers(whole);
    const float* next = pack_;
    for (std::size_t i = 0; i < sizes_.size(); ++i) {
        if (wholes[i]) ops_.add_inplace(wholes[i], next, sizes_[i]);
        next += sizes_[i];
    }
}

}  // namespace parbench

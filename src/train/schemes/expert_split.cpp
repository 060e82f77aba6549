// An MoE model's two data-parallel groups (Megatron-core's parallel_state.py, order
// "tp-cp-ep-dp-pp"): the dense parameters (attention, norms, router, shared experts,
// embeddings) are replicas over the gradient group (dp x cp), the routed experts are replicas
// only over the expert-data-parallel group, the ranks that hold the same E/ep experts (carved
// from dp x cp: theory/expert_parallel.hpp, train/mesh.hpp). So two
// schemes of the same kind (DDP or ZeRO-1/2/3) run side by side: one over the dense units and
// the gradient group, one over the routed-expert units and the expert-data-parallel group, each
// averaging its gradients and sharding its states over its own group. Every rank scales its
// micro-batch loss by the global batch times the gradient group's size G (the step driver), so
// that averaging over G gives the dense gradient; an expert's gradient, summed on the rank that
// runs it over its ep group's tokens, is averaged over only G / ep copies, which leaves it ep
// times the model's: the experts' scheme scales it by 1/ep (Megatron-core likewise scales the
// expert gradients by the expert-data-parallel size over the data-parallel size).
#include <stdexcept>
#include <string>
#include <vector>

#include "train/schemes/scheme.hpp"

namespace parbench {
namespace {

class ExpertSplitScheme : public TrainingScheme {
  public:
    ExpertSplitScheme(Device& device, Ops& ops, Communicator& gradient_group, Communicator& expert_data_group,
                      MemoryLedger& ledger, const Model& model, const SchemeSettings& settings,
                      const std::vector<double>& gradient_weights)
        : dense_units_(model.layout().dense_units()), expert_units_(model.layout().routed_expert_units()),
          dense_layout_(model.layout().select_units(dense_units_)),
          expert_layout_(model.layout().select_units(expert_units_)) {
        // canonical_parameters concatenates the two parts: the experts' units must come last.
        if (!dense_units_.empty() && dense_units_.back() > expert_units_.front())
            throw std::logic_error("ExpertSplitScheme: the routed experts' units must follow the dense ones");
        const std::size_t units = model.layout().units().size();
        local_.assign(units, -1);
        of_experts_.assign(units, false);
        for (std::size_t i = 0; i < dense_units_.size(); ++i)
            local_[static_cast<std::size_t>(dense_units_[i])] = static_cast<int>(i);
        for (std::size_t i = 0; i < expert_units_.size(); ++i) {
            local_[static_cast<std::size_t>(expert_units_[i])] = static_cast<int>(i);
            of_experts_[static_cast<std::size_t>(expert_units_[i])] = true;
        }
        const std::vector<int> order = model.parameter_use_order();
        // The model's tensors are the dense units' then the experts' (their units come last).
        const auto dense_tensors = static_cast<std::ptrdiff_t>(dense_layout_.tensors().size());
        const auto weights_of = [&](bool experts) {
            if (gradient_weights.empty()) return std::vector<double>{};
            return experts ? std::vector<double>(gradient_weights.begin() + dense_tensors, gradient_weights.end())
                           : std::vector<double>(gradient_weights.begin(), gradient_weights.begin() + dense_tensors);
        };
        dense_ = make_scheme(SchemeContext{device, ops, gradient_group, ledger, dense_layout_,
                                           select_use_order(order, dense_units_), model.parameter_units_held_at_once(),
                                           1.0f, weights_of(false)},
                             settings);
        // The model holds one routed-expert unit at a time (its MoE layer's, with the block).
        const float one_over_ep = static_cast<float>(expert_data_group.size()) / static_cast<float>(gradient_group.size());
        experts_ = make_scheme(SchemeContext{device, ops, expert_data_group, ledger, expert_layout_,
                                             select_use_order(order, expert_units_), 1, one_over_ep, weights_of(true)},
                               settings);
    }

    std::string name() const override { return dense_->name(); }
    void initialize_parameters(std::uint64_t seed) override {
        dense_->initialize_parameters(seed);
        experts_->initialize_parameters(seed);
    }
    void begin_step(int step) override {
        dense_->begin_step(step);
        experts_->begin_step(step);
    }
    void begin_microbatch(int index) override {
        dense_->begin_microbatch(index);
        experts_->begin_microbatch(index);
    }
    void end_backward() override {
        dense_->end_backward();
        experts_->end_backward();
    }
    void optimizer_step(int step) override {
        dense_->optimizer_step(step);
        experts_->optimizer_step(step);
    }
    std::vector<float> canonical_parameters() override {
        std::vector<float> parameters = dense_->canonical_parameters();
        const std::vector<float> experts = experts_->canonical_parameters();
        parameters.insert(parameters.end(), experts.begin(), experts.end());
        return parameters;
    }
    double gradient_square_sum() const override {
        return dense_->gradient_square_sum() + experts_->gradient_square_sum();
    }

    const float* acquire(int unit) override { return part(unit).acquire(local(unit)); }
    void release(int unit) override { part(unit).release(local(unit)); }
    float* gradients(int unit) override { return part(unit).gradients(local(unit)); }
    void gradients_complete(int unit) override { part(unit).gradients_complete(local(unit)); }

  private:
    TrainingScheme& part(int unit) { return of_experts_.at(static_cast<std::size_t>(unit)) ? *experts_ : *dense_; }
    int local(int unit) const { return local_.at(static_cast<std::size_t>(unit)); }

    std::vector<int> dense_units_, expert_units_;
    // The schemes keep pointers to their layouts: members, built before them.
    ParameterLayout dense_layout_, expert_layout_;
    std::vector<int> local_;        // per model unit: its index in its part's layout
    std::vector<bool> of_experts_;  // per model unit: a routed-expert unit
    std::unique_ptr<TrainingScheme> dense_, experts_;
};

}  // namespace

std::unique_ptr<TrainingScheme> make_model_scheme(Device& device, Ops& ops, Communicator& gradient_group,
                                                  Communicator& expert_data_group, MemoryLedger& ledger,
                                                  const Model& model, const SchemeSettings& settings,
                                                  const std::vector<double>& gradient_weights) {
    if (model.layout().routed_expert_units().empty())
        return make_scheme(SchemeContext{device, ops, gradient_group, ledger, model.layout(),
                                         model.parameter_use_order(), model.parameter_units_held_at_once(), 1.0f,
                                         gradient_weights},
                           settings);
    return std::make_unique<ExpertSplitScheme>(device, ops, gradient_group, expert_data_group, ledger, model,
                                               settings, gradient_weights);
}

}  // namespace parbench

#include "train/reference_check.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace parbench {

std::vector<ZeroGradientElements> zero_gradient_elements(const ModelConfig& model, int seq_len) {
    std::vector<ZeroGradientElements> zero;
    if (!model.has_sequence()) return zero;
    const auto C = static_cast<std::size_t>(model.hidden);
    const bool one_token = seq_len == 1;
    const char* one_token_why = "query and key projections at a sequence of one token (a softmax over one key is 1)";
    for (int l = 0; l < model.layers; ++l) {
        const std::string p = "h" + std::to_string(l) + ".";
        if (model.kind == ModelKind::gpt) {
            // qkvw (3C, C) and qkvb (3C): the query's rows, then the key's, then the value's.
            if (one_token) {
                zero.push_back({p + "qkvw", 0, 2 * C * C, one_token_why});
                zero.push_back({p + "qkvb", 0, 2 * C, one_token_why});
            } else {
                zero.push_back({p + "qkvb", C, C, "the key bias (the softmax ignores what it adds to every score)"});
            }
        } else if (model.kind == ModelKind::llama && one_token) {
            const auto kv = static_cast<std::size_t>(model.kv_heads) * C / static_cast<std::size_t>(model.heads);
            zero.push_back({p + "wq", 0, C * C, one_token_why});
            zero.push_back({p + "wk", 0, kv * C, one_token_why});
        }
    }
    return zero;
}

double adam_step_bound(const AdamWSettings& adamw) {
    const double momentum = 1.0 - adamw.beta1, second = std::sqrt(1.0 - adamw.beta2);
    return adamw.lr * (momentum > second ? momentum / second : 1.0);
}

CheckTolerances check_tolerances(const ModelConfig& model, int seq_len, Precision precision,
                                 const AdamWSettings& adamw, int steps) {
    CheckTolerances tolerances;
    const bool bf16 = precision == Precision::bf16;
    tolerances.loss = bf16 ? check_tolerance_loss_bf16 : check_tolerance_loss;
    tolerances.loss_per_step = bf16 ? check_tolerance_loss_per_step_bf16 : check_tolerance_loss_per_step;
    tolerances.params = bf16 ? check_tolerance_params_bf16 : check_tolerance_params;
    tolerances.zero_gradient = zero_gradient_elements(model, seq_len);
    tolerances.zero_gradient_elementwise = 2.0 * adam_step_bound(adamw) * steps;
    return tolerances;
}

bool RoutingComparison::passed() const {
    return std::all_of(flips.begin(), flips.end(), [&](const RoutingFlip& flip) { return flip.margin <= near_tie; });
}

CheckResult compare_with_reference(const std::vector<double>& loss, const std::vector<float>& parameters,
                                   const std::vector<double>& reference_loss,
                                   const std::vector<float>& reference_parameters, const ParameterLayout& layout,
                                   const CheckTolerances& tolerances) {
    if (loss.size() != reference_loss.size() || parameters.size() != reference_parameters.size() ||
        parameters.size() != layout.total_numel())
        throw std::logic_error("compare_with_reference: runs of different shapes");
    CheckResult check;
    const auto loss_tolerance = [&](std::size_t step) {
        return std::max(tolerances.loss, tolerances.loss_per_step * static_cast<double>(step + 1));
    };
    check.tolerance_loss = loss_tolerance(loss.empty() ? 0 : loss.size() - 1);
    check.tolerance_params = tolerances.params;
    check.tolerance_zero_gradient = tolerances.zero_gradient_elementwise;
    // NaN never compares greater: it counts as an infinite difference.
    auto worse = [](double current, double difference) {
        return std::isnan(difference) ? INFINITY : std::max(current, difference);
    };
    for (std::size_t i = 0; i < loss.size(); ++i) {
        const double scale = std::max(std::abs(reference_loss[i]), 1e-30);
        check.rel_diff_loss.push_back(std::abs(loss[i] - reference_loss[i]) / scale);
        check.max_rel_diff_loss = worse(check.max_rel_diff_loss, check.rel_diff_loss.back());
        check.loss_over_tolerance = worse(check.loss_over_tolerance, check.rel_diff_loss.back() / loss_tolerance(i));
    }
    std::multimap<std::string, const ZeroGradientElements*> zero_of;
    for (const ZeroGradientElements& zero : tolerances.zero_gradient) zero_of.emplace(zero.tensor, &zero);
    std::size_t offset = 0;
    std::vector<bool> zero_gradient;
    for (const TensorSpec& tensor : layout.tensors()) {
        zero_gradient.assign(tensor.numel, false);
        const auto [first_zero, last_zero] = zero_of.equal_range(tensor.name);
        for (auto at = first_zero; at != last_zero; ++at)
            for (std::size_t i = at->second->first; i < at->second->first + at->second->count && i < tensor.numel; ++i)
                zero_gradient[i] = true;
        double difference_squares = 0.0;
        double reference_squares = 0.0;
        for (std::size_t i = 0; i < tensor.numel; ++i) {
            const double reference = reference_parameters[offset + i];
            const double difference = static_cast<double>(parameters[offset + i]) - reference;
            if (zero_gradient[i]) {
                ++check.zero_gradient_elements;
                check.max_abs_diff_zero_gradient = worse(check.max_abs_diff_zero_gradient, std::abs(difference));
                continue;
            }
            difference_squares += difference * difference;
            reference_squares += reference * reference;
        }
        offset += tensor.numel;
        const double relative = std::sqrt(difference_squares) / std::max(std::sqrt(reference_squares), 1e-30);
        if (std::isnan(relative) || relative > check.max_rel_diff_params) check.worst_tensor = tensor.name;
        check.max_rel_diff_params = worse(check.max_rel_diff_params, relative);
    }
    check.passed = check.loss_over_tolerance <= 1.0 &&
                   check.max_rel_diff_params <= check.tolerance_params &&
                   check.max_abs_diff_zero_gradient <= check.tolerance_zero_gradient;
    return check;
}

CheckResult compare_with_reference(const std::vector<double>& loss, const std::vector<float>& parameters,
                                   const std::vector<double>& reference_loss,
                                   const std::vector<float>& reference_parameters, const ParameterLayout& layout,
                                   Precision precision) {
    CheckTolerances tolerances;
    if (precision == Precision::bf16) {
        tolerances.loss = check_tolerance_loss_bf16;
        tolerances.loss_per_step = check_tolerance_loss_per_step_bf16;
        tolerances.params = check_tolerance_params_bf16;
    }
    return compare_with_reference(loss, parameters, reference_loss, reference_parameters, layout, tolerances);
}

}  // namespace parbench

#include "train/schemes/gradient_squares.hpp"

#include <stdexcept>

namespace parbench {

GradientSquares::GradientSquares(const ParameterLayout& layout, const FlatLayout& flat,
                                 const std::vector<double>& weights) {
    if (!weights.empty() && weights.size() != layout.tensors().size())
        throw std::logic_error("GradientSquares: a weight per tensor of the layout, or none");
    std::vector<std::pair<std::size_t, double>> starts;  // each tensor's first flat element and weight
    for (std::size_t t = 0; t < layout.tensors().size(); ++t) {
        const TensorSpec& tensor = layout.tensors()[t];
        starts.emplace_back(flat.unit_offset(tensor.unit) + tensor.offset_in_unit, weights.empty() ? 1.0 : weights[t]);
    }
    std::sort(starts.begin(), starts.end());
    // Padding between tensors is zero and joins the run before it; a run starts where the weight changes.
    runs_.emplace_back(0, starts.empty() ? 1.0 : starts.front().second);
    for (const auto& [first, weight] : starts)
        if (weight != runs_.back().second) runs_.emplace_back(first, weight);
}

}  // namespace parbench

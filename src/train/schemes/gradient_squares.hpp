// The squares of the gradient elements a scheme's updates read, summed for the step's grad
// norm (Megatron-LM's training log; here never clipped). A scheme runs each update through
// update(), which splits a range of its flat buffer where the tensors' weights change and adds
// what each piece's AdamW returns (Ops::adamw_update_squares: the squares come with the update,
// the gradients read once) times the piece's weight and the scheme's scale: DDP's dp replicas
// each count 1/dp of theirs, ZeRO's shards their own. The weights (train_run.cpp) count a
// tensor held alike by several model-parallel ranks (tp x pp) once; summed over the world the
// shares are the model's squared norm, the same on every layout.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "theory/parameter_layout.hpp"

namespace parbench {

class GradientSquares {
  public:
    // `weights`: per tensor of `layout` (empty: every tensor 1).
    GradientSquares(const ParameterLayout& layout, const FlatLayout& flat, const std::vector<double>& weights);
    void reset() { total_ = 0.0; }
    // Runs `update(first, last)` over the flat elements [begin, end) in pieces of one weight; each
    // call returns the sum of the squares of the gradients it read.
    template <typename Update>
    void update(std::size_t begin, std::size_t end, double scale, Update update);
    double total() const { return total_; }

  private:
    // (first flat element, weight) from there to the next run's start; the first starts at 0.
    std::vector<std::pair<std::size_t, double>> runs_;
    double total_ = 0.0;
};

template <typename Update>
void GradientSquares::update(std::size_t begin, std::size_t end, double scale, Update update) {
    auto run = std::upper_bound(runs_.begin(), runs_.end(), begin,
                                [](std::size_t at, const std::pair<std::size_t, double>& r) { return at < r.first; });
    --run;  // the run holding `begin` (runs_ starts at 0)
    while (begin < end) {
        const auto next = run + 1;
        const std::size_t stop = next == runs_.end() ? end : std::min(end, next->first);
        total_ += scale * run->second * update(begin, stop);
        begin = stop;
        run = next;
    }
}

}  // namespace parbench

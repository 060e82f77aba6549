// GPipe (Huang et al., arXiv 1811.06965 sec. 2.2): every micro-batch's forward, then every
// backward. Each stage holds the activations of all m micro-batches at the turn, the memory
// price of the simplest schedule; the bubble is (p-1) forward+backward slots per stage.
#include "theory/pipeline/schedule.hpp"

namespace parbench::detail {

ComputeOrder gpipe_order(const ScheduleShape& shape) {
    ComputeOrder order(static_cast<std::size_t>(shape.stages));
    for (auto& actions : order) {
        for (int k = 0; k < shape.microbatches; ++k) actions.push_back(Action{ActionKind::forward, k, 0, -1});
        for (int k = 0; k < shape.microbatches; ++k) actions.push_back(Action{ActionKind::backward, k, 0, -1});
    }
    return order;
}

}  // namespace parbench::detail

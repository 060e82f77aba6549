// Data parallelism with replicated parameters (PyTorch DDP, arXiv 2006.15704): every rank
// holds all parameters, gradients and optimizer state, runs its slice of the global batch,
// and averages gradients with one all-reduce per bucket. Buckets are filled in backward
// order; with overlap a bucket's iallreduce starts as soon as its last unit's gradient is
// complete (DDP sec. 3.2.3), and the optimizer waits for all of them.
// The gradient buffer is zeroed once; AdamW clears each gradient as it reads it, so a step
// starts on zeroed gradients without a fill. On a group of one (update_in_backward) each unit
// is updated as soon as its gradient is complete (PyTorch's optimizer-in-backward idea:
// the unit's arrays are still in cache), and optimizer_step updates only what is left. With one
// micro-batch a model may also hand a unit's gradient over in pieces (updates_in_pieces), each
// updated as it arrives from a buffer still in cache; the unit's update then covers the rest.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "core/nvtx.hpp"
#include "train/buffer_view.hpp"
#include "train/schemes/gradient_squares.hpp"
#include "train/schemes/scheme.hpp"

namespace parbench {
namespace {

class DataParallel : public TrainingScheme {
  public:
    DataParallel(const SchemeContext& context, const SchemeSettings& settings)
        : device_(context.device), ops_(context.ops), dp_(context.dp), settings_(settings),
          gradient_scale_(context.gradient_scale),
          flat_(context.layout, group_units_by_bytes(context.layout, settings.bucket_bytes), 1),
          squares_(context.layout, flat_, context.gradient_weights) {
        const std::size_t bytes = flat_.padded_numel() * sizeof(float);
        params_ = context.ledger.allocate(MemoryCategory::params, bytes);
        grads_ = context.ledger.allocate(MemoryCategory::grads, bytes);
        adam_m_ = context.ledger.allocate(MemoryCategory::optimizer, bytes);
        adam_v_ = context.ledger.allocate(MemoryCategory::optimizer, bytes);
        remaining_units_.resize(flat_.segments().size());
        updated_.assign(context.layout.units().size(), 0);
        pieces_.assign(context.layout.units().size(), PieceRange{});
        ops_.fill(grads_.as<float>(), 0.0f, flat_.padded_numel());
    }

    std::string name() const override { return "ddp"; }

    void initialize_parameters(std::uint64_t seed) override {
        for (const Segment& segment : flat_.segments()) {
            std::vector<float> values(segment.padded_numel);
            flat_.initial_values(seed, segment.offset, segment.offset + segment.padded_numel, values);
            Buffer target = buffer_view(params_, segment.offset * sizeof(float), values.size() * sizeof(float));
            device_.copy_from_host(target, values.data(), values.size() * sizeof(float));
        }
    }

    // The gradients are zero here: zeroed once when allocated, then cleared by every update.
    void begin_step(int step) override {
        step_ = step;
        squares_.reset();
        std::fill(updated_.begin(), updated_.end(), 0);
        std::fill(pieces_.begin(), pieces_.end(), PieceRange{});
    }

    void begin_microbatch(int index) override {
        microbatch_ = index;
        for (std::size_t s = 0; s < flat_.segments().size(); ++s)
            remaining_units_[s] = flat_.segments()[s].end_unit - flat_.segments()[s].first_unit;
    }

    const float* acquire(int unit) override { return params_.as<float>() + flat_.unit_offset(unit); }
    void release(int) override {}
    float* gradients(int unit) override { return grads_.as<float>() + flat_.unit_offset(unit); }

    void gradients_complete(int unit) override {
        if (updates_in_backward()) {
            update_unit(unit);
            return;
        }
        const int segment = flat_.segment_index_of_unit(unit);
        if (--remaining_units_[static_cast<std::size_t>(segment)] > 0) return;
        if (!settings_.overlap || microbatch_ + 1 < settings_.microbatches || dp_.size() == 1) return;
        const Segment& s = flat_.segments()[static_cast<std::size_t>(segment)];
        float* data = grads_.as<float>() + s.offset;
        in_flight_.push_back(dp_.iallreduce(data, data, s.numel, DType::float32, ReduceOp::avg));
        // MPI progresses a non-blocking collective only inside MPI calls: poll the oldest.
        while (!in_flight_.empty() && in_flight_.front().test()) in_flight_.erase(in_flight_.begin());
    }

    // One micro-batch: its contribution is the whole gradient, so a piece needs nothing from
    // the gradient buffer and is final when handed over.
    // (Not with a gradient scale: a piece's gradient is the model's, read-only.)
    bool updates_in_pieces(int) const override {
        return updates_in_backward() && settings_.microbatches == 1 && gradient_scale_ == 1.0f;
    }

    void update_piece(int unit, std::size_t first, std::size_t count, const float* gradient) override {
        if (!updates_in_pieces(unit)) throw std::logic_error("DataParallel: update_piece while not updating in pieces");
        PieceRange& done = pieces_.at(static_cast<std::size_t>(unit));
        if (done.end > done.begin && first != done.end)
            throw std::logic_error("DataParallel: update_piece of a piece not adjacent to the previous one");
        if (first + count > unit_end(unit) - flat_.unit_offset(unit))
            throw std::logic_error("DataParallel: update_piece past the unit's end");
        const std::size_t at = flat_.unit_offset(unit) + first;
        const AdamWSettings& a = settings_.adamw;
        squares_.update(at, at + count, replica_share(), [&](std::size_t from, std::size_t to) {
            return ops_.adamw_update_squares(params_.as<float>() + from, gradient + (from - at),
                                             adam_m_.as<float>() + from, adam_v_.as<float>() + from, to - from, a.lr,
                                             a.beta1, a.beta2, a.eps, a.weight_decay, step_);
        });
        if (done.end == done.begin) done.begin = first;
        done.end = first + count;
    }

    void end_backward() override {
        // One rank's average is its own gradient: nothing to issue.
        if (dp_.size() == 1) return;
        NvtxRange range("gradient allreduce");
        if (settings_.overlap) {
            for (Request& request : in_flight_) request.wait();
            in_flight_.clear();
            return;
        }
        const auto& segments = flat_.segments();
        for (auto s = segments.rbegin(); s != segments.rend(); ++s) {
            float* data = grads_.as<float>() + s->offset;
            dp_.allreduce(data, data, s->numel, DType::float32, ReduceOp::avg);
        }
    }

    void optimizer_step(int step) override {
        NvtxRange range("optimizer");
        if (step != step_) throw std::logic_error("DataParallel: optimizer_step for another step than begin_step's");
        if (std::find(updated_.begin(), updated_.end(), 1) == updated_.end()) {
            update(0, flat_.padded_numel());  // one pass over everything
            return;
        }
        for (int unit = 0; unit < static_cast<int>(updated_.size()); ++unit)
            if (updated_[static_cast<std::size_t>(unit)] == 0) update_unit(unit);
    }

    std::vector<float> canonical_parameters() override {
        std::vector<float> flat(flat_.padded_numel());
        device_.copy_to_host(flat.data(), params_, flat.size() * sizeof(float));
        return flat_.canonical(flat);
    }

    double gradient_square_sum() const override { return squares_.total(); }

  private:
    // Every rank of the group updates every element: each counts its share of the replicas.
    double replica_share() const { return 1.0 / static_cast<double>(dp_.size()); }

    bool updates_in_backward() const {
        return settings_.update_in_backward && dp_.size() == 1 && microbatch_ + 1 == settings_.microbatches;
    }

    // Elements [begin, end) of the flat buffers, gradients cleared.
    void update(std::size_t begin, std::size_t end) {
        if (gradient_scale_ != 1.0f) ops_.scale(grads_.as<float>() + begin, gradient_scale_, end - begin);
        const AdamWSettings& a = settings_.adamw;
        squares_.update(begin, end, replica_share(), [&](std::size_t from, std::size_t to) {
            return ops_.adamw_update_clearing_grads_squares(params_.as<float>() + from, grads_.as<float>() + from,
                                                            adam_m_.as<float>() + from, adam_v_.as<float>() + from,
                                                            to - from, a.lr, a.beta1, a.beta2, a.eps, a.weight_decay,
                                                            step_);
        });
    }

    // A unit's elements: up to the next unit of its segment, or the segment's padded end.
    std::size_t unit_end(int unit) const {
        const Segment& s = flat_.segment_of_unit(unit);
        return unit + 1 < s.end_unit ? flat_.unit_offset(unit + 1) : s.offset + s.padded_numel;
    }

    // The unit's elements but the pieces already updated (whose gradients were never written).
    void update_unit(int unit) {
        const std::size_t begin = flat_.unit_offset(unit), end = unit_end(unit);
        const PieceRange done = pieces_[static_cast<std::size_t>(unit)];
        if (done.begin < done.end) {
            if (done.begin > 0) update(begin, begin + done.begin);
            if (begin + done.end < end) update(begin + done.end, end);
        } else {
            update(begin, end);
        }
        updated_[static_cast<std::size_t>(unit)] = 1;
    }

    // Elements [begin, end) of a unit updated by update_piece in this step (empty: none).
    struct PieceRange {
        std::size_t begin = 0, end = 0;
    };

    Device& device_;
    Ops& ops_;
    Communicator& dp_;
    SchemeSettings settings_;
    float gradient_scale_;
    FlatLayout flat_;
    GradientSquares squares_;
    Buffer params_, grads_, adam_m_, adam_v_;
    std::vector<int> remaining_units_;  // per bucket, in this micro-batch's backward
    std::vector<PieceRange> pieces_;    // per unit
    std::vector<Request> in_flight_;
    int microbatch_ = 0;
    int step_ = 0;                // AdamW's t of the step in progress
    std::vector<char> updated_;   // per unit: updated in this step's backward already
};

}  // namespace

std::unique_ptr<TrainingScheme> make_data_parallel(const SchemeContext& context, const SchemeSettings& settings) {
    return std::make_unique<DataParallel>(context, settings);
}

}  // namespace parbench

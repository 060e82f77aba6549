// ZeRO data parallelism (Rajbhandari et al., arXiv 1910.02054 sec. 5): the optimizer state
// (stage 1), also the gradients (stage 2), also the parameters (stage 3) are partitioned
// over the data-parallel ranks. Rank r owns the r-th slice of every segment of the flat
// buffer (parameter_layout.hpp); AdamW runs on the owned slices only.
//
//   stage 1: full gradients accumulate as in DDP; each bucket is reduce-scattered into the
//            gradient shard (after backward, or as soon as ready with --overlap); after the
//            update, each bucket's parameters are all-gathered back to every rank.
//   stage 2: a bucket's gradients live in a full-size slot only while the bucket is being
//            computed; once complete it is reduce-scattered into the shard (blocking, or
//            non-blocking with --overlap) and the slot is reused. All-gather as stage 1.
//   stage 3: each unit (layer) is its own segment; its parameters are all-gathered into a
//            slot before its forward and again before its backward and dropped after use,
//            except where the model keeps a unit held between the two (GPT's tied embedding,
//            held from the encoder through the head into backward, is gathered once)
//            (--prefetch gathers the next unit with iallgather while this one computes);
//            gradients as stage 2; no all-gather after the update.
//
// Slots are allocated once and reused, so "freed after use" means "returned to the pool":
// the ledger shows the pool, which is what a caching allocator holds in practice.
#include <stdexcept>
#include <string>
#include <vector>

#include "core/nvtx.hpp"
#include "train/buffer_view.hpp"
#include "theory/zero_partition.hpp"
#include "train/schemes/gradient_squares.hpp"
#include "train/schemes/scheme.hpp"

namespace parbench {
namespace {

struct Slot {
    Buffer buffer;
    int segment = -1;  // the segment whose data it holds, or -1 when free
};

// A gradient reduction in flight, completed in issue order.
struct PendingReduction {
    Request request;
    int segment = 0;
    bool accumulate = false;  // reduced into the staging shard: add into the gradient shard
};

class Zero : public TrainingScheme {
  public:
    Zero(const SchemeContext& context, const SchemeSettings& settings)
        : device_(context.device), ops_(context.ops), dp_(context.dp), settings_(settings),
          rank_(context.dp.rank()), gradient_scale_(context.gradient_scale), use_order_(context.use_order),
          flat_(context.layout,
                settings.zero_stage == 3 ? one_unit_per_group(context.layout)
                                         : group_units_by_bytes(context.layout, settings.bucket_bytes),
                context.dp.size()),
          squares_(context.layout, flat_, context.gradient_weights) {
        if (settings.zero_stage < 1 || settings.zero_stage > 3)
            throw std::logic_error("Zero: stage " + std::to_string(settings.zero_stage));
        MemoryLedger& ledger = context.ledger;
        const std::size_t shard_bytes = flat_.shard_numel() * sizeof(float);
        const std::size_t full_bytes = flat_.padded_numel() * sizeof(float);
        const std::size_t slot_bytes = flat_.largest_segment_numel() * sizeof(float);
        adam_m_ = ledger.allocate(MemoryCategory::optimizer, shard_bytes);
        adam_v_ = ledger.allocate(MemoryCategory::optimizer, shard_bytes);
        grad_shard_ = ledger.allocate(MemoryCategory::grads, shard_bytes);
        if (stage() == 1) {
            grads_full_ = ledger.allocate(MemoryCategory::grads, full_bytes);
        } else {
            const int grad_slots = zero_gradient_slots(settings.overlap);
            for (int i = 0; i < grad_slots; ++i)
                grad_slots_.push_back(Slot{ledger.allocate(MemoryCategory::grads, slot_bytes), -1});
            if (settings.microbatches > 1) staging_ = ledger.allocate(MemoryCategory::grads, shard_bytes);
        }
        if (stage() == 3) {
            params_shard_ = ledger.allocate(MemoryCategory::params, shard_bytes);
            const int param_slots = zero_gather_slots(context.units_held_at_once, settings.prefetch);
            for (int i = 0; i < param_slots; ++i)
                param_slots_.push_back(Slot{ledger.allocate(MemoryCategory::params, slot_bytes), -1});
        } else {
            params_full_ = ledger.allocate(MemoryCategory::params, full_bytes);
        }
        const std::size_t segments = flat_.segments().size();
        remaining_units_.resize(segments);
        grad_slot_of_.assign(segments, -1);
        param_slot_of_.assign(segments, -1);
        gathers_in_flight_.resize(segments);
    }

    std::string name() const override { return "zero" + std::to_string(stage()); }

    void initialize_parameters(std::uint64_t seed) override {
        if (stage() == 3) {
            const std::vector<float> shard = flat_.initial_shard(seed, rank_);
            device_.copy_from_host(params_shard_, shard.data(), shard.size() * sizeof(float));
            return;
        }
        for (const Segment& segment : flat_.segments()) {
            std::vector<float> values(segment.padded_numel);
            flat_.initial_values(seed, segment.offset, segment.offset + segment.padded_numel, values);
            Buffer target = buffer_view(params_full_, segment.offset * sizeof(float), values.size() * sizeof(float));
            device_.copy_from_host(target, values.data(), values.size() * sizeof(float));
        }
    }

    void begin_step(int) override {
        if (stage() == 1) ops_.fill(grads_full_.as<float>(), 0.0f, flat_.padded_numel());
    }

    void begin_microbatch(int index) override {
        // The staging shard is reused by the next micro-batch's reductions.
        complete_reductions(reductions_in_flight_.size());
        microbatch_ = index;
        use_cursor_ = 0;
        for (std::size_t s = 0; s < flat_.segments().size(); ++s)
            remaining_units_[s] = flat_.segments()[s].end_unit - flat_.segments()[s].first_unit;
    }

    // ---- parameters ------------------------------------------------------------------------
    const float* acquire(int unit) override {
        if (stage() < 3) return params_full_.as<float>() + flat_.unit_offset(unit);
        if (use_cursor_ >= use_order_.size() || use_order_[use_cursor_] != unit)
            throw std::logic_error("ZeRO-3: the model acquired unit " + std::to_string(unit) +
                                   " out of its declared parameter_use_order");
        ++use_cursor_;
        const int segment = flat_.segment_index_of_unit(unit);
        {
            NvtxRange range("gather " + std::to_string(unit));
            Request& in_flight = gathers_in_flight_[static_cast<std::size_t>(segment)];
            if (in_flight.pending()) {
                in_flight.wait();
            } else if (param_slot_of_[static_cast<std::size_t>(segment)] < 0) {
                const int slot = take_param_slot(segment);
                start_gather(segment, slot, /*blocking=*/true);
            }
            if (settings_.prefetch && use_cursor_ < use_order_.size()) prefetch(use_order_[use_cursor_]);
        }
        return param_slot_data(segment);
    }

    void release(int unit) override {
        if (stage() < 3) return;
        const int segment = flat_.segment_index_of_unit(unit);
        const int slot = param_slot_of_[static_cast<std::size_t>(segment)];
        param_slots_[static_cast<std::size_t>(slot)].segment = -1;
        param_slot_of_[static_cast<std::size_t>(segment)] = -1;
    }

    // ---- gradients -------------------------------------------------------------------------
    float* gradients(int unit) override {
        if (stage() == 1) return grads_full_.as<float>() + flat_.unit_offset(unit);
        const int segment = flat_.segment_index_of_unit(unit);
        const Segment& s = flat_.segments()[static_cast<std::size_t>(segment)];
        if (grad_slot_of_[static_cast<std::size_t>(segment)] < 0) {
            const int slot = take_grad_slot(segment);
            ops_.fill(grad_slots_[static_cast<std::size_t>(slot)].buffer.as<float>(), 0.0f, s.padded_numel);
        }
        return grad_slot_data(segment) + (flat_.unit_offset(unit) - s.offset);
    }

    void gradients_complete(int unit) override {
        const int segment = flat_.segment_index_of_unit(unit);
        if (--remaining_units_[static_cast<std::size_t>(segment)] > 0) return;
        const bool last_microbatch = microbatch_ + 1 == settings_.microbatches;
        if (stage() == 1 && !(last_microbatch && settings_.overlap)) return;  // reduced in end_backward
        reduce(segment, /*blocking=*/!settings_.overlap);
        // MPI progresses a non-blocking collective only inside MPI calls: poll the oldest.
        while (!reductions_in_flight_.empty() && reductions_in_flight_.front().request.test())
            complete_reductions(1);
    }

    void end_backward() override {
        NvtxRange range("gradient reduce-scatter");
        if (stage() == 1 && !settings_.overlap) {
            const auto& segments = flat_.segments();
            for (int s = static_cast<int>(segments.size()) - 1; s >= 0; --s) reduce(s, /*blocking=*/true);
        }
        complete_reductions(reductions_in_flight_.size());
    }

    void optimizer_step(int step) override {
        {
            NvtxRange range("optimizer");
            const AdamWSettings& a = settings_.adamw;
            squares_.reset();
            for (const Segment& s : flat_.segments()) {
                // This rank's slice of the segment: its elements' squares are counted here only.
                const std::size_t first = s.offset + static_cast<std::size_t>(rank_) * s.shard_numel;
                float* grads = grad_shard_.as<float>() + s.shard_offset;
                if (gradient_scale_ != 1.0f) ops_.scale(grads, gradient_scale_, s.shard_numel);
                float* params = owned_params(s);
                float* m = adam_m_.as<float>() + s.shard_offset;
                float* v = adam_v_.as<float>() + s.shard_offset;
                squares_.update(first, first + s.shard_numel, 1.0, [&](std::size_t from, std::size_t to) {
                    const std::size_t at = from - first;
                    return ops_.adamw_update_squares(params + at, grads + at, m + at, v + at, to - from, a.lr, a.beta1,
                                                     a.beta2, a.eps, a.weight_decay, step);
                });
            }
        }
        // A group of one holds every parameter it updated where the gather would put it.
        if (stage() == 3 || dp_.size() == 1) return;
        NvtxRange range("parameter allgather");
        for (const Segment& s : flat_.segments())
            dp_.allgather(owned_params(s), params_full_.as<float>() + s.offset, s.shard_numel, DType::float32);
    }

    std::vector<float> canonical_parameters() override {
        std::vector<float> flat(flat_.padded_numel());
        if (stage() < 3) {
            device_.copy_to_host(flat.data(), params_full_, flat.size() * sizeof(float));
            return flat_.canonical(flat);
        }
        Buffer gathered = device_.allocate(flat.size() * sizeof(float));  // the check path: untimed
        for (const Segment& s : flat_.segments())
            dp_.allgather(params_shard_.as<float>() + s.shard_offset, gathered.as<float>() + s.offset, s.shard_numel,
                          DType::float32);
        device_.copy_to_host(flat.data(), gathered, flat.size() * sizeof(float));
        return flat_.canonical(flat);
    }

    double gradient_square_sum() const override { return squares_.total(); }

  private:
    int stage() const { return settings_.zero_stage; }

    // This rank's slice of a segment's parameters.
    float* owned_params(const Segment& s) {
        if (stage() == 3) return params_shard_.as<float>() + s.shard_offset;
        return params_full_.as<float>() + s.offset + static_cast<std::size_t>(rank_) * s.shard_numel;
    }

    static int take_free(std::vector<Slot>& slots, int segment) {
        for (std::size_t i = 0; i < slots.size(); ++i) {
            if (slots[i].segment >= 0) continue;
            slots[i].segment = segment;
            return static_cast<int>(i);
        }
        return -1;
    }

    int take_param_slot(int segment) {
        const int slot = take_free(param_slots_, segment);
        if (slot < 0) throw std::logic_error("ZeRO-3: more units held at once than parameter slots");
        param_slot_of_[static_cast<std::size_t>(segment)] = slot;
        return slot;
    }

    float* param_slot_data(int segment) {
        return param_slots_[static_cast<std::size_t>(param_slot_of_[static_cast<std::size_t>(segment)])]
            .buffer.as<float>();
    }

    void start_gather(int segment, int slot, bool blocking) {
        const Segment& s = flat_.segments()[static_cast<std::size_t>(segment)];
        const float* shard = params_shard_.as<float>() + s.shard_offset;
        float* full = param_slots_[static_cast<std::size_t>(slot)].buffer.as<float>();
        if (dp_.size() == 1) {  // the shard is the whole unit: a local copy, no collective
            device_.copy(param_slots_[static_cast<std::size_t>(slot)].buffer, 0, params_shard_,
                         s.shard_offset * sizeof(float), s.shard_numel * sizeof(float));
            return;
        }
        if (blocking)
            dp_.allgather(shard, full, s.shard_numel, DType::float32);
        else
            gathers_in_flight_[static_cast<std::size_t>(segment)] = dp_.iallgather(shard, full, s.shard_numel,
                                                                                   DType::float32);
    }

    void prefetch(int unit) {
        const int segment = flat_.segment_index_of_unit(unit);
        if (param_slot_of_[static_cast<std::size_t>(segment)] >= 0) return;  // held or already coming
        const int slot = take_free(param_slots_, segment);
        if (slot < 0) return;
        param_slot_of_[static_cast<std::size_t>(segment)] = slot;
        start_gather(segment, slot, /*blocking=*/false);
    }

    int take_grad_slot(int segment) {
        int slot = take_free(grad_slots_, segment);
        while (slot < 0) {
            if (reductions_in_flight_.empty())
                throw std::logic_error("ZeRO: more gradient buckets open at once than gradient slots");
            complete_reductions(1);
            slot = take_free(grad_slots_, segment);
        }
        grad_slot_of_[static_cast<std::size_t>(segment)] = slot;
        return slot;
    }

    float* grad_slot_data(int segment) {
        return grad_slots_[static_cast<std::size_t>(grad_slot_of_[static_cast<std::size_t>(segment)])]
            .buffer.as<float>();
    }

    // Reduce-scatters a complete segment's gradient into this rank's shard (averaged).
    void reduce(int segment, bool blocking) {
        const Segment& s = flat_.segments()[static_cast<std::size_t>(segment)];
        NvtxRange range("reduce-scatter segment " + std::to_string(segment));
        const float* full = stage() == 1 ? grads_full_.as<float>() + s.offset : grad_slot_data(segment);
        // Micro-batches after the first reduce into a staging shard and add (stages 2, 3).
        const bool accumulate = stage() > 1 && microbatch_ > 0;
        float* target = (accumulate ? staging_ : grad_shard_).as<float>() + s.shard_offset;
        PendingReduction pending{Request(), segment, accumulate};
        if (dp_.size() == 1) {  // the shard is the whole segment: a local copy, no collective
            const Buffer& source = stage() == 1 ? grads_full_ : grad_slots_[static_cast<std::size_t>(
                                                                    grad_slot_of_[static_cast<std::size_t>(segment)])]
                                                                    .buffer;
            device_.copy(accumulate ? staging_ : grad_shard_, s.shard_offset * sizeof(float), source,
                         (stage() == 1 ? s.offset : 0) * sizeof(float), s.shard_numel * sizeof(float));
            reductions_in_flight_.push_back(std::move(pending));
            complete_reductions(1);
            return;
        }
        if (blocking) {
            dp_.reduce_scatter(full, target, s.shard_numel, DType::float32, ReduceOp::avg);
            reductions_in_flight_.push_back(std::move(pending));
            complete_reductions(1);
            return;
        }
        pending.request = dp_.ireduce_scatter(full, target, s.shard_numel, DType::float32, ReduceOp::avg);
        reductions_in_flight_.push_back(std::move(pending));
    }

    // Completes the `count` oldest reductions: waits, adds staged micro-batch gradients into
    // the shard, and returns their gradient slots to the pool.
    void complete_reductions(std::size_t count) {
        for (std::size_t i = 0; i < count && !reductions_in_flight_.empty(); ++i) {
            PendingReduction& pending = reductions_in_flight_.front();
            pending.request.wait();
            const Segment& s = flat_.segments()[static_cast<std::size_t>(pending.segment)];
            if (pending.accumulate)
                ops_.add_inplace(grad_shard_.as<float>() + s.shard_offset, staging_.as<float>() + s.shard_offset,
                                 s.shard_numel);
            if (stage() > 1) {
                const int slot = grad_slot_of_[static_cast<std::size_t>(pending.segment)];
                grad_slots_[static_cast<std::size_t>(slot)].segment = -1;
                grad_slot_of_[static_cast<std::size_t>(pending.segment)] = -1;
            }
            reductions_in_flight_.erase(reductions_in_flight_.begin());
        }
    }

    Device& device_;
    Ops& ops_;
    Communicator& dp_;
    SchemeSettings settings_;
    int rank_;
    float gradient_scale_;
    std::vector<int> use_order_;
    FlatLayout flat_;
    GradientSquares squares_;

    Buffer adam_m_, adam_v_, grad_shard_, staging_;
    Buffer grads_full_;   // stage 1
    Buffer params_full_;  // stages 1, 2
    Buffer params_shard_; // stage 3
    std::vector<Slot> grad_slots_;   // stages 2, 3
    std::vector<Slot> param_slots_;  // stage 3
    std::vector<int> grad_slot_of_;  // per segment: its gradient slot, or -1
    std::vector<int> param_slot_of_; // per segment: its parameter slot (held or being gathered), or -1
    std::vector<Request> gathers_in_flight_;  // per segment: a prefetch not yet waited for
    std::vector<PendingReduction> reductions_in_flight_;
    std::vector<int> remaining_units_;
    std::size_t use_cursor_ = 0;
    int microbatch_ = 0;
};

}  // namespace

std::unique_ptr<TrainingScheme> make_zero(const SchemeContext& context, const SchemeSettings& settings) {
    return std::make_unique<Zero>(context, settings);
}

}  // namespace parbench

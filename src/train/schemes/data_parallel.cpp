// Data parallelism with replicated parameters (PyTorch DDP, arXiv 2006.15704): every rank
// holds all parameters, gradients and optimizer state, runs its slice of the global batch,
// and averages gradients with one all-reduce per bucket. Buckets are filled in backward
// order; with overlap a bucket's iallreduce starts as soon as its last unit's gradient is
// complete (DDP sec. 3.2.3), and the optimizer waits for all of them.
#include <vector>

#include "core/nvtx.hpp"
#include "train/buffer_view.hpp"
#include "train/schemes/scheme.hpp"

namespace parbench {
namespace {

class DataParallel : public TrainingScheme {
  public:
    DataParallel(const SchemeContext& context, const SchemeSettings& settings)
        : device_(context.device), ops_(context.ops), dp_(context.dp), settings_(settings),
          flat_(context.layout, group_units_by_bytes(context.layout, settings.bucket_bytes), 1) {
        const std::size_t bytes = flat_.padded_numel() * sizeof(float);
        params_ = context.ledger.allocate(MemoryCategory::params, bytes);
        grads_ = context.ledger.allocate(MemoryCategory::grads, bytes);
        adam_m_ = context.ledger.allocate(MemoryCategory::optimizer, bytes);
        adam_v_ = context.ledger.allocate(MemoryCategory::optimizer, bytes);
        remaining_units_.resize(flat_.segments().size());
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

    void begin_step() override { ops_.fill(grads_.as<float>(), 0.0f, flat_.padded_numel()); }

    void begin_microbatch(int index) override {
        microbatch_ = index;
        for (std::size_t s = 0; s < flat_.segments().size(); ++s)
            remaining_units_[s] = flat_.segments()[s].end_unit - flat_.segments()[s].first_unit;
    }

    const float* acquire(int unit) override { return params_.as<float>() + flat_.unit_offset(unit); }
    void release(int) override {}
    float* gradients(int unit) override { return grads_.as<float>() + flat_.unit_offset(unit); }

    void gradients_complete(int unit) override {
        const int segment = flat_.segment_index_of_unit(unit);
        if (--remaining_units_[static_cast<std::size_t>(segment)] > 0) return;
        if (!settings_.overlap || microbatch_ + 1 < settings_.microbatches || dp_.size() == 1) return;
        const Segment& s = flat_.segments()[static_cast<std::size_t>(segment)];
        float* data = grads_.as<float>() + s.offset;
        in_flight_.push_back(dp_.iallreduce(data, data, s.numel, DType::float32, ReduceOp::avg));
        // MPI progresses a non-blocking collective only inside MPI calls: poll the oldest.
        while (!in_flight_.empty() && in_flight_.front().test()) in_flight_.erase(in_flight_.begin());
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
        const AdamWSettings& a = settings_.adamw;
        ops_.adamw_update(params_.as<float>(), grads_.as<float>(), adam_m_.as<float>(), adam_v_.as<float>(),
                          flat_.padded_numel(), a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, step);
    }

    std::vector<float> canonical_parameters() override {
        std::vector<float> flat(flat_.padded_numel());
        device_.copy_to_host(flat.data(), params_, flat.size() * sizeof(float));
        return flat_.canonical(flat);
    }

  private:
    Device& device_;
    Ops& ops_;
    Communicator& dp_;
    SchemeSettings settings_;
    FlatLayout flat_;
    Buffer params_, grads_, adam_m_, adam_v_;
    std::vector<int> remaining_units_;  // per bucket, in this micro-batch's backward
    std::vector<Request> in_flight_;
    int microbatch_ = 0;
};

}  // namespace

std::unique_ptr<TrainingScheme> make_data_parallel(const SchemeContext& context, const SchemeSettings& settings) {
    return std::make_unique<DataParallel>(context, settings);
}

}  // namespace parbench

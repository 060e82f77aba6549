#include "train/models/mlp.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/nvtx.hpp"
#include "theory/mlp_buffers.hpp"
#include "train/synthetic_data.hpp"

// Tensor parallelism (tensor_parallel.hpp), two ways:
//
//   megatron:  layers pair up as a column-parallel linear (output features split, GELU on
//              the slice, no communication) and a row-parallel one (input features split,
//              partial sums all-reduced, bias added once by group rank 0): one all-reduce
//              forward and one backward per pair (Megatron-LM sec. 3, the MLP of fig. 3a).
//              An odd last layer stays column-parallel and the loss is taken on its slice.
//   allgather: every layer column-parallel, its GELU output slices all-gathered each layer
//              (the straightforward split, as in Stanford CS336's parallelism lecture);
//              backward reduce-scatters the input gradient. The gathered input arrives
//              rank-major, (t, B, H/t), so a layer multiplies each slice by the matching
//              (H/t, H/t) block of its weight, stored block by block.
//
// The MSE of a column-parallel last layer is the mean over its H/t columns on each rank;
// the row's loss is their sum over the group / t (one all-reduce of B floats).
namespace parbench {
namespace {

using mlp_layout::LayerTensors;
using mlp_layout::LinearSplit;
using mlp_layout::layer_split;
using mlp_layout::input_in_slices;

class MlpModel : public Model {
  public:
    MlpModel(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed, Ops& ops,
             MemoryLedger& ledger, const TensorParallelGroup& tp, Precision precision)
        : seed_(seed), ops_(ops), device_(ledger.device()), tp_(tp), B_(shape.batch), H_(config.hidden),
          Hl_(config.hidden / tp.size()), L_(config.layers),
          sizes_(mlp_buffers(config, tp.split(), shape.batch, shape.microbatches, precision)),
          matmuls_(ops, precision, ledger, sizes_.matmuls) {
        if (tp.split().style == TensorParallelStyle::allgather && tp.size() < 2)
            throw std::logic_error("MlpModel: the allgather style needs a tensor-parallel group of 2 or more");
        tensors_ = mlp_layout::build(config, tp.split(), layout_);
        // Every buffer is one of the table's (theory/mlp_buffers.hpp), which the memory theory sums;
        // a size of 0 is a buffer this layout does not hold.
        auto buffer = [&](std::size_t count) {
            buffers_.push_back(ledger.allocate(MemoryCategory::activations, count * sizeof(float)));
            return buffers_.back();
        };
        auto floats = [&](std::size_t count) { return count == 0 ? nullptr : buffer(count).as<float>(); };
        for (int k = 0; k < shape.microbatches; ++k) {
            inputs_.push_back(buffer(sizes_.input));
            targets_.push_back(buffer(sizes_.target));
            losses_.push_back(buffer(sizes_.loss));
        }
        const std::size_t before = ledger.usage().live_of(MemoryCategory::activations);
        for (const MlpLayerBuffers& kept : sizes_.layers) {
            pre_.push_back(floats(kept.pre));
            // GELU's output is the next layer's input, kept for its weight gradient; the last
            // layer's output is its pre-activation; in the allgather style the gathered copy is
            // kept instead and the slice is scratch.
            post_.push_back(&kept == &sizes_.layers.back() ? pre_.back() : floats(kept.post));
            gathered_.push_back(floats(kept.gathered));
        }
        activation_bytes_per_layer_ = (ledger.usage().live_of(MemoryCategory::activations) - before) /
                                      static_cast<std::size_t>(L_);
        dlosses_ = floats(sizes_.dlosses);
        dpre_ = floats(sizes_.dpre);
        dpost_ = floats(sizes_.dpost);
        slice_ = floats(sizes_.slice);
        dgathered_ = floats(sizes_.dgathered);
        piece_rows_ = sizes_.piece_rows;
        piece_ = floats(sizes_.piece);
    }

    const ParameterLayout& layout() const override { return layout_; }

    std::vector<int> parameter_use_order() const override {
        std::vector<int> order;
        for (int l = 0; l < L_; ++l) order.push_back(l);
        for (int l = L_ - 2; l >= 0; --l) order.push_back(l);  // the last layer stays held into backward
        return order;
    }

    void stage_batch(int microbatch, std::uint64_t first_sample) override {
        const std::size_t n = rows() * static_cast<std::size_t>(H_);
        std::vector<float> inputs(n), targets(n);
        synthetic_regression(seed_, first_sample, B_, H_, inputs, targets);
        device_.copy_from_host(inputs_[static_cast<std::size_t>(microbatch)], inputs.data(), n * sizeof(float));
        // A column-parallel last layer is compared with its slice of the target.
        const int width = output_width();
        std::vector<float> local(rows() * static_cast<std::size_t>(width));
        const std::size_t first_column = static_cast<std::size_t>(width == H_ ? 0 : tp_.rank() * width);
        for (std::size_t row = 0; row < rows(); ++row)
            for (std::size_t j = 0; j < static_cast<std::size_t>(width); ++j)
                local[row * static_cast<std::size_t>(width) + j] = targets[row * static_cast<std::size_t>(H_) + first_column + j];
        device_.copy_from_host(targets_[static_cast<std::size_t>(microbatch)], local.data(), local.size() * sizeof(float));
    }

    void forward(int microbatch, ParameterAccess& access) override {
        const float* x = inputs_[static_cast<std::size_t>(microbatch)].as<float>();
        for (int l = 0; l < L_; ++l) {
            NvtxRange range("layer" + std::to_string(l) + " forward");
            const float* p = access.acquire(l);
            const LayerTensors& t = tensors_[static_cast<std::size_t>(l)];
            const auto i = static_cast<std::size_t>(l);
            linear_forward(l, pre_[i], x, param(p, t.weight), param(p, t.bias));
            if (l + 1 < L_) {
                const std::size_t n = rows() * static_cast<std::size_t>(width_of(l));
                if (gathered_[i] != nullptr) {
                    ops_.gelu_forward(slice_, pre_[i], n);
                    tp_.allgather(slice_, gathered_[i], n);
                    x = gathered_[i];
                } else {
                    ops_.gelu_forward(post_[i], pre_[i], n);
                    x = post_[i];
                }
                access.release(l);
            } else {
                last_params_ = p;
            }
        }
        NvtxRange range("loss forward");
        float* losses = losses_[static_cast<std::size_t>(microbatch)].as<float>();
        ops_.mse_forward(losses, pre_.back(), targets_[static_cast<std::size_t>(microbatch)].as<float>(), B_,
                         output_width());
        if (output_width() < H_) {  // the mean over H columns is the mean of the t slices' means
            tp_.allreduce_sum(losses, rows());
            ops_.scale(losses, 1.0f / static_cast<float>(tp_.size()), rows());
        }
    }

    void backward(int microbatch, float loss_scale, ParameterAccess& access) override {
        {
            NvtxRange range("loss backward");
            const int width = output_width();
            // mse_backward divides by the columns it sees (H/t on a slice); the loss divides by H.
            ops_.fill(dlosses_, loss_scale * static_cast<float>(width) / static_cast<float>(H_), rows());
            ops_.fill(dpre_, 0.0f, rows() * static_cast<std::size_t>(width));
            ops_.mse_backward(dpre_, dlosses_, pre_.back(), targets_[static_cast<std::size_t>(microbatch)].as<float>(),
                              B_, width);
        }
        for (int l = L_ - 1; l >= 0; --l) {
            NvtxRange range("layer" + std::to_string(l) + " backward");
            const float* p = l == L_ - 1 ? last_params_ : access.acquire(l);
            float* g = access.gradients(l);
            const LayerTensors& t = tensors_[static_cast<std::size_t>(l)];
            // dpre_ holds d(pre-activation of layer l); linear_backward leaves d(GELU output of
            // layer l - 1) in dpost_, whole or this rank's slice as that layer produced it.
            if (fuses_update(l, access))
                linear_backward_updating_weight(l, microbatch, grad(g, t.bias), param(p, t.weight), access);
            else
                linear_backward(l, microbatch, grad(g, t.weight), grad(g, t.bias), param(p, t.weight));
            if (l > 0) {
                const std::size_t n = rows() * static_cast<std::size_t>(width_of(l - 1));
                ops_.gelu_backward_overwrite(dpre_, pre_[static_cast<std::size_t>(l - 1)], dpost_, n);
            }
            access.release(l);
            access.gradients_complete(l);
        }
        last_params_ = nullptr;
    }

    double mean_loss(int microbatch) const override {
        std::vector<float> losses(rows());
        device_.copy_to_host(losses.data(), losses_[static_cast<std::size_t>(microbatch)], losses.size() * sizeof(float));
        double sum = 0.0;
        for (float loss : losses) sum += loss;
        return sum / static_cast<double>(losses.size());
    }

    std::size_t activation_bytes_per_layer() const override { return activation_bytes_per_layer_; }

  private:
    std::size_t rows() const { return static_cast<std::size_t>(B_); }
    const float* param(const float* unit_base, int tensor) const {
        return unit_base + layout_.tensor(tensor).offset_in_unit;
    }
    float* grad(float* unit_base, int tensor) const { return unit_base + layout_.tensor(tensor).offset_in_unit; }
    LinearSplit split_of(int layer) const { return layer_split(tp_.split(), layer); }
    // Columns of layer l's output on this rank.
    int width_of(int layer) const { return split_of(layer) == LinearSplit::row ? H_ : Hl_; }
    int output_width() const { return width_of(L_ - 1); }

    void linear_forward(int l, float* out, const float* x, const float* weight, const float* bias) {
        if (split_of(l) == LinearSplit::row) {
            // Partial sums over this rank's input features; the bias counts once.
            matmuls_.forward(out, x, weight, tp_.adds_replicated_terms() ? bias : nullptr, B_, Hl_, H_);
            tp_.allreduce_sum(out, rows() * static_cast<std::size_t>(H_));
        } else if (input_in_slices(tp_.split(), l)) {
            // out = Σ_q slice_q · block_qᵀ + bias over the t gathered slices.
            for (int q = 0; q < tp_.size(); ++q) {
                float* target = q == 0 ? out : slice_;
                matmuls_.forward(target, x + slice_offset(q), weight + block_offset(q), q == 0 ? bias : nullptr, B_,
                                 Hl_, Hl_);
                if (q > 0) ops_.add_inplace(out, slice_, rows() * static_cast<std::size_t>(Hl_));
            }
        } else {
            matmuls_.forward(out, x, weight, bias, B_, H_, Hl_);
        }
    }

    // Layer l's input, as forward gave it to the matmul.
    const float* layer_input(int l, int microbatch) const {
        const auto i = static_cast<std::size_t>(l);
        return l == 0 ? inputs_[static_cast<std::size_t>(microbatch)].as<float>()
                      : gathered_[i - 1] != nullptr ? gathered_[i - 1] : post_[i - 1];
    }

    // The weight's AdamW fused with its gradient (whole layers only: the piece buffer exists
    // then), where the scheme and the ops allow it.
    bool fuses_update(int l, const ParameterAccess& access) const {
        return piece_ != nullptr && ops_.has_weight_gradient_rows() && access.updates_in_pieces(l);
    }

    // linear_backward of a whole layer, piece_rows_ rows of the weight at a time: the piece's
    // share of the input gradient (it reads those rows of the weight), its weight gradient into
    // piece_, then the scheme's update of those rows at once. The piece of the gradient (1 MB at
    // H = 1024) goes from the GEMM that writes it to the update that reads it without the whole
    // gradient (4 MB) going to memory and back, and the weight's rows, just read by the input
    // gradient, are still in cache for the update; the gradient buffer is neither read, written
    // nor cleared.
    void linear_backward_updating_weight(int l, int microbatch, float* dbias, const float* weight,
                                         ParameterAccess& access) {
        const float* x = layer_input(l, microbatch);
        float* dx = l == 0 ? nullptr : dpost_;
        matmuls_.backward_overwrite_input(nullptr, nullptr, dbias, dpre_, x, weight, B_, H_, H_);
        const std::size_t weight_first = layout_.tensor(tensors_[static_cast<std::size_t>(l)].weight).offset_in_unit;
        for (int first = 0; first < H_; first += piece_rows_) {
            const int rows = std::min(piece_rows_, H_ - first);
            if (dx != nullptr) ops_.matmul_input_gradient_rows(dx, dpre_, weight, B_, H_, H_, first, rows, first > 0);
            ops_.matmul_weight_gradient_rows(piece_, dpre_, x, B_, H_, H_, first, rows);
            const std::size_t row = static_cast<std::size_t>(H_);
            access.update_piece(l, weight_first + static_cast<std::size_t>(first) * row,
                                static_cast<std::size_t>(rows) * row, piece_);
        }
    }

    void linear_backward(int l, int microbatch, float* dweight, float* dbias, const float* weight) {
        const float* x = layer_input(l, microbatch);
        float* dx = l == 0 ? nullptr : dpost_;
        // Each input gradient below is written whole by its first (and only) matmul: no fill.
        if (split_of(l) == LinearSplit::row) {
            // dpre_ is whole and the same on every rank: dx is this rank's slice, no communication.
            matmuls_.backward_overwrite_input(dx, dweight, dbias, dpre_, x, weight, B_, Hl_, H_);
        } else if (input_in_slices(tp_.split(), l)) {
            // slice q of dgathered_ is (B, H/t) at slice_offset(q): disjoint, each written once
            for (int q = 0; q < tp_.size(); ++q)
                matmuls_.backward_overwrite_input(dgathered_ + slice_offset(q), dweight + block_offset(q),
                                                  q == 0 ? dbias : nullptr, dpre_, x + slice_offset(q),
                                                  weight + block_offset(q), B_, Hl_, Hl_);
            // The backward of the all-gather: sum the ranks' partial gradients of every slice
            // and keep this rank's.
            tp_.reduce_scatter(dgathered_, dpost_, rows() * static_cast<std::size_t>(Hl_));
        } else {
            matmuls_.backward_overwrite_input(dx, dweight, dbias, dpre_, x, weight, B_, H_, Hl_);
            if (dx != nullptr) tp_.allreduce_sum(dx, rows() * static_cast<std::size_t>(H_));  // Megatron's f
        }
    }

    std::size_t slice_offset(int q) const { return static_cast<std::size_t>(q) * rows() * static_cast<std::size_t>(Hl_); }
    std::size_t block_offset(int q) const {
        return static_cast<std::size_t>(q) * static_cast<std::size_t>(Hl_) * static_cast<std::size_t>(Hl_);
    }

    std::uint64_t seed_;
    Ops& ops_;
    Device& device_;
    TensorParallelGroup tp_;
    int B_, H_, Hl_, L_;  // Hl_ = H/t: a column-parallel layer's output columns on this rank
    MlpBuffers sizes_;    // the buffers this model allocates, by the table the memory theory sums
    Matmuls matmuls_;     // every linear layer, in the run's precision
    ParameterLayout layout_;
    std::vector<LayerTensors> tensors_;
    std::vector<Buffer> buffers_;
    std::vector<Buffer> inputs_, targets_, losses_;  // one slot per micro-batch; targets: the last layer's columns
    std::vector<float*> pre_, post_;  // per layer, (B, width_of(l)); post_ of the last layer is its pre_
    std::vector<float*> gathered_;    // allgather style: per layer but the last, (t, B, H/t)
    float *dlosses_ = nullptr, *dpre_ = nullptr, *dpost_ = nullptr;
    float *slice_ = nullptr, *dgathered_ = nullptr;  // allgather style scratch
    float* piece_ = nullptr;  // rows of a weight gradient (mlp_holds_gradient_piece), piece_rows_ x H
    int piece_rows_ = 0;
    const float* last_params_ = nullptr;  // the last layer, acquired by forward, released by backward
    std::size_t activation_bytes_per_layer_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_mlp_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                      Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp,
                                      Precision precision) {
    return std::make_unique<MlpModel>(config, shape, seed, ops, ledger, tp, precision);
}

}  // namespace parbench

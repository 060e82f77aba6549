// What the transformer models (gpt.cpp, llama.cpp) hold alike, whatever their layers: the
// arena their activations come from, the pools of activation slots a pipeline chunk runs
// its micro-batches in, each micro-batch's tokens, targets and losses, and the pack that
// sums sequence-parallel norm gradients over the tensor-parallel group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "train/memory_ledger.hpp"
#include "train/ops/ops.hpp"
#include "train/tensor_parallel.hpp"

namespace parbench {

// The model's activation buffers, allocated once from the ledger and owned together.
class ActivationArena {
  public:
    explicit ActivationArena(MemoryLedger& ledger) : ledger_(ledger) {}
    Buffer buffer(std::size_t bytes) {
        buffers_.push_back(ledger_.allocate(MemoryCategory::activations, bytes));
        return buffers_.back();
    }
    float* floats(std::size_t count) { return buffer(count * sizeof(float)).as<float>(); }

  private:
    MemoryLedger& ledger_;
    std::vector<Buffer> buffers_;
};

// out = in, n floats, through the model's ops (on its device).
inline void copy_floats(Ops& ops, float* out, const float* in, std::size_t n) {
    ops.fill(out, 0.0f, n);
    ops.add_inplace(out, in, n);
}

// Each pipeline chunk owns a pool of activation slots, one per micro-batch it holds at once:
// a slot is taken by the micro-batch's first touch (its input arriving, or its forward) and
// given back after its backward (after W when the backward is split). `Slot` is the model's
// struct of buffers with `int microbatch = -1` (its holder, -1 when free) and `int previous`
// (its last holder).
template <class Slot>
class ActivationSlots {
  public:
    explicit ActivationSlots(std::string model) : model_(std::move(model)) {}

    void add_chunk(std::vector<Slot> pool) { pools_.push_back(std::move(pool)); }

    // The slot `microbatch` holds on `chunk`, taking a free one if it holds none.
    Slot& take(int microbatch, int chunk) {
        auto& pool = pools_.at(static_cast<std::size_t>(chunk));
        for (Slot& s : pool)
            if (s.microbatch == microbatch) return s;
        for (Slot& s : pool)
            if (s.microbatch < 0) {
                s.microbatch = microbatch;
                return s;
            }
        throw std::logic_error(model_ + ": more micro-batches in flight on chunk " + std::to_string(chunk) +
                               " than the schedule's peak of " + std::to_string(pool.size()));
    }

    // The slot it holds, or once given back the one it held last: its buffers stay intact
    // until taken again, so its d(input) can still be sent from there.
    Slot& held(int microbatch, int chunk) {
        auto& pool = pools_.at(static_cast<std::size_t>(chunk));
        for (Slot& s : pool)
            if (s.microbatch == microbatch) return s;
        for (Slot& s : pool)
            if (s.microbatch < 0 && s.previous == microbatch) return s;
        throw std::logic_error(model_ + ": micro-batch " + std::to_string(microbatch) + " holds no slot on chunk " +
                               std::to_string(chunk));
    }

    static void give_back(Slot& s) {
        s.previous = s.microbatch;
        s.microbatch = -1;
    }

  private:
    std::string model_;
    std::vector<std::vector<Slot>> pools_;
};

// Each micro-batch's tokens and targets (ints) and per-token losses (floats), `rows` of each:
// staged before the step, read by the embedding and the loss.
class MicrobatchTokens {
  public:
    void allocate(ActivationArena& arena, int microbatches, std::size_t rows);

    // The synthetic micro-batch of `batch` sequences from `first_sample` (synthetic_data.hpp).
    // `positions` are the positions of each sequence this rank holds (context parallelism),
    // empty when it holds them all; every rank of a cp group draws the whole sequences and
    // keeps its positions' tokens and targets.
    void stage(Device& device, int microbatch, std::uint64_t seed, std::uint64_t first_sample, int batch, int seq_len,
               int vocab, const std::vector<int>& positions);

    const int* tokens(int microbatch) const { return tokens_.at(static_cast<std::size_t>(microbatch)).as<int>(); }
    const int* targets(int microbatch) const { return targets_.at(static_cast<std::size_t>(microbatch)).as<int>(); }
    float* losses(int microbatch) { return losses_.at(static_cast<std::size_t>(microbatch)).as<float>(); }
    double mean_loss(Device& device, int microbatch) const;

  private:
    std::size_t rows_ = 0;
    std::vector<Buffer> tokens_, targets_, losses_;
};

// Under sequence parallelism each rank's norms see 1/t of the tokens, so their weight (and
// bias) gradients are partial sums: computed into a zeroed pack, all-reduced over the group
// as one call and added to the gradients (after every micro-batch, since the gradient
// buffers accumulate across them). Without SP they are written in place: they are whole.
class NormGradientPack {
  public:
    NormGradientPack(Ops& ops, TensorParallelGroup& tp, int channels) : ops_(ops), tp_(tp), channels_(channels) {}

    // Room for `tensors` norm tensors of `channels` each; allocated only under SP.
    void allocate(ActivationArena& arena, int tensors);

    void begin(int tensors);
    // Where the norm backward writes the gradient whose whole is `whole`: its `slot` in the pack.
    float* gradient(float* whole, int slot) const;
    // Sums the pack over the group and adds slot i into the i-th of `wholes`.
    void finish(std::initializer_list<float*> wholes);

  private:
    Ops& ops_;
    TensorParallelGroup& tp_;
    std::size_t channels_;
    float* pack_ = nullptr;
};

}  // namespace parbench

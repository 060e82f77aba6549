// What the transformer models (gpt.cpp, llama.cpp) hold alike, whatever their layers: the
// arena their activations come from, the pool of kept activations a pipeline rank's chunks
// run their micro-batches in, each micro-batch's tokens, targets and losses, and the pack that
// sums sequence-parallel norm gradients over the tensor-parallel group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "device/device.hpp"
#include "theory/model_layout.hpp"
#include "theory/transformer_buffers.hpp"
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
    // A buffer of a size table (theory/*_buffers.hpp), where 0 means the layout takes none: null.
    float* floats_or_null(std::size_t count) { return count == 0 ? nullptr : floats(count); }

  private:
    MemoryLedger& ledger_;
    std::vector<Buffer> buffers_;
};

// out = in, n floats, through the model's ops (on its device).
inline void copy_floats(Ops& ops, float* out, const float* in, std::size_t n) {
    ops.fill(out, 0.0f, n);
    ops.add_inplace(out, in, n);
}

// One pipeline rank's kept activations: one pool its chunks share, sized by
// theory/pipeline/partition.hpp's activation_pool (the schedule's peak of what the rank holds at
// once, not the sum of every chunk's own peak; under the interleaved schedule no more than
// Megatron-LM's L(1 + (p-1)/(p v)) layers). A micro-batch's first touch of a chunk (its input
// arriving, or its forward) takes a slot (the chunk's input and gradient buffers), one layer
// store per layer of the chunk and, on the chunk that ends the model, a head; its backward (its
// W when the backward is split) gives them back. Taking more than the pool holds is a logic
// error, so the schedule's figure is enforced, not estimated. `Block` and `Stash` are the
// model's per-layer buffers (the stash is the zero-bubble weight-gradient inputs), `Head` the
// final norm's, logits' and loss's.
template <class Block, class Stash, class Head>
class KeptActivations {
  public:
    struct Slot {
        int microbatch = -1, chunk = -1;         // its holder, -1 when free
        int previous = -1, previous_chunk = -1;  // its last holder
        float* input = nullptr;                  // (R,C): the chunk's input (the embedding's output on stage 0)
        float* gradient = nullptr;               // (R,C): d(output) received, d(input) after the backward
        std::vector<Block> blocks;               // indexed by layer: the holder's chunk's layers are set
        std::vector<Stash> stash;                // likewise (split backward only)
        Head head{};                             // the holder's, on the chunk that ends the model
    };

    // `layer_kind[l]`: which stores global layer l takes (theory/pipeline/partition.hpp).
    KeptActivations(std::string model, std::vector<LayerRange> chunks, std::vector<int> layer_kind)
        : model_(std::move(model)), chunks_(std::move(chunks)), layer_kind_(std::move(layer_kind)) {}

    // Called while allocating, before any take: references to slots stay valid after.
    void add_slot(float* input, float* gradient) {
        Slot s;
        s.input = input;
        s.gradient = gradient;
        s.blocks.resize(layer_kind_.size());
        s.stash.resize(layer_kind_.size());
        slots_.push_back(std::move(s));
    }
    void add_store(int kind, const Block& block, const Stash& stash) {
        if (static_cast<std::size_t>(kind) >= stores_.size()) stores_.resize(static_cast<std::size_t>(kind) + 1);
        stores_[static_cast<std::size_t>(kind)].push_back(Store{block, stash});
    }
    void add_head(const Head& head) { heads_.push_back(head); }

    // The slot `microbatch` holds on `chunk`, taking a free one and the chunk's stores if it holds none.
    Slot& take(int microbatch, int chunk) {
        for (Slot& s : slots_)
            if (s.microbatch == microbatch && s.chunk == chunk) return s;
        // Any free slot: the executor sends a slot's d(input) right after the backward that
        // gave it back, before it takes another (blocking mode looks up the send's buffer first).
        Slot* free = nullptr;
        for (Slot& s : slots_)
            if (s.microbatch < 0) {
                free = &s;
                break;
            }
        if (free == nullptr) throw exhausted("slots", slots_.size(), chunk);
        const LayerRange& range = chunks_.at(static_cast<std::size_t>(chunk));
        std::vector<std::size_t> needed(stores_.size(), 0);
        for (int l = range.first; l < range.end; ++l) {
            const auto kind = static_cast<std::size_t>(layer_kind_.at(static_cast<std::size_t>(l)));
            if (kind >= stores_.size() || ++needed[kind] > stores_[kind].size())
                throw exhausted("layer stores", capacity(kind), chunk);
        }
        if (ends_model(range) && heads_.empty()) throw exhausted("heads", head_capacity(), chunk);
        for (int l = range.first; l < range.end; ++l) {
            auto& pool = stores_[static_cast<std::size_t>(layer_kind_[static_cast<std::size_t>(l)])];
            free->blocks[static_cast<std::size_t>(l)] = pool.back().block;
            free->stash[static_cast<std::size_t>(l)] = pool.back().stash;
            pool.pop_back();
        }
        if (ends_model(range)) {
            free->head = heads_.back();
            heads_.pop_back();
        }
        free->microbatch = microbatch;
        free->chunk = chunk;
        return *free;
    }

    // The slot it holds, or once given back the one it held last: its boundary buffers stay
    // intact until taken again, so its d(input) can still be sent from there.
    Slot& held(int microbatch, int chunk) {
        for (Slot& s : slots_)
            if (s.microbatch == microbatch && s.chunk == chunk) return s;
        for (Slot& s : slots_)
            if (s.microbatch < 0 && s.previous == microbatch && s.previous_chunk == chunk) return s;
        throw std::logic_error(model_ + ": micro-batch " + std::to_string(microbatch) + " holds no slot on chunk " +
                               std::to_string(chunk));
    }

    // Returns the slot's layer stores and head to the pool; its boundary buffers stay with it.
    void give_back(Slot& s) {
        const LayerRange& range = chunks_.at(static_cast<std::size_t>(s.chunk));
        for (int l = range.first; l < range.end; ++l) {
            const auto index = static_cast<std::size_t>(l);
            stores_[static_cast<std::size_t>(layer_kind_[index])].push_back(Store{s.blocks[index], s.stash[index]});
            s.blocks[index] = Block{};
            s.stash[index] = Stash{};
        }
        if (ends_model(range)) {
            heads_.push_back(s.head);
            s.head = Head{};
        }
        s.previous = s.microbatch;
        s.previous_chunk = s.chunk;
        s.microbatch = -1;
        s.chunk = -1;
    }

  private:
    struct Store {
        Block block;
        Stash stash;
    };
    bool ends_model(const LayerRange& range) const { return range.end == static_cast<int>(layer_kind_.size()); }
    std::size_t capacity(std::size_t kind) const {
        std::size_t stores = kind < stores_.size() ? stores_[kind].size() : 0;
        // Those held by slots, of that kind.
        for (const Slot& s : slots_)
            if (s.microbatch >= 0) {
                const LayerRange& range = chunks_.at(static_cast<std::size_t>(s.chunk));
                for (int l = range.first; l < range.end; ++l)
                    stores += static_cast<std::size_t>(layer_kind_[static_cast<std::size_t>(l)]) == kind;
            }
        return stores;
    }
    std::size_t head_capacity() const {
        std::size_t heads = heads_.size();
        for (const Slot& s : slots_)
            if (s.microbatch >= 0) heads += ends_model(chunks_.at(static_cast<std::size_t>(s.chunk)));
        return heads;
    }
    std::logic_error exhausted(const std::string& what, std::size_t capacity, int chunk) const {
        return std::logic_error(model_ + ": taking micro-batch's " + what + " on chunk " + std::to_string(chunk) +
                                " would hold more than the schedule's peak of " + std::to_string(capacity) + " " +
                                what + " (theory/pipeline/partition.hpp)");
    }

    std::string model_;
    std::vector<LayerRange> chunks_;
    std::vector<int> layer_kind_;
    std::vector<Slot> slots_;
    std::vector<std::vector<Store>> stores_;  // free ones, per kind
    std::vector<Head> heads_;                 // free ones
};

// Each micro-batch's tokens and targets (ints) and per-token losses (floats), `rows` of each:
// staged before the step, read by the embedding and the loss.
class MicrobatchTokens {
  public:
    void allocate(ActivationArena& arena, int microbatches, const MicrobatchBuffers& sizes);

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

    // Room for the norm tensors' gradients: theory/transformer_buffers.hpp's norm_pack, `tensors`
    // of `channels` each under SP, none without.
    void allocate(ActivationArena& arena, std::size_t floats);

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

#include "train/models/transformer_parts.hpp"

#include "train/synthetic_data.hpp"

namespace parbench {

void MicrobatchTokens::allocate(ActivationArena& arena, int microbatches, const MicrobatchBuffers& sizes) {
    rows_ = sizes.tokens;
    for (int k = 0; k < microbatches; ++k) {
        tokens_.push_back(arena.buffer(sizes.tokens * sizeof(int)));
        targets_.push_back(arena.buffer(sizes.targets * sizeof(int)));
        losses_.push_back(arena.buffer(sizes.losses * sizeof(float)));
    }
}

void MicrobatchTokens::stage(Device& device, int microbatch, std::uint64_t seed, std::uint64_t first_sample,
                             int batch, int seq_len, int vocab, const std::vector<int>& positions) {
    std::vector<int> tokens(rows_), targets(rows_);
    if (positions.empty()) {
        synthetic_tokens(seed, first_sample, batch, seq_len, vocab, tokens, targets);
    } else {
        const auto full = static_cast<std::size_t>(seq_len);
        std::vector<int> all_tokens(static_cast<std::size_t>(batch) * full), all_targets(all_tokens.size());
        synthetic_tokens(seed, first_sample, batch, seq_len, vocab, all_tokens, all_targets);
        for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b)
            for (std::size_t i = 0; i < positions.size(); ++i) {
                const std::size_t from = b * full + static_cast<std::size_t>(positions[i]);
                tokens[b * positions.size() + i] = all_tokens[from];
                targets[b * positions.size() + i] = all_targets[from];
            }
    }
    const auto index = static_cast<std::size_t>(microbatch);
    device.copy_from_host(tokens_.at(index), tokens.data(), rows_ * sizeof(int));
    device.copy_from_host(targets_.at(index), targets.data(), rows_ * sizeof(int));
}

double MicrobatchTokens::mean_loss(Device& device, int microbatch) const {
    std::vector<float> losses(rows_);
    device.copy_to_host(losses.data(), losses_.at(static_cast<std::size_t>(microbatch)), rows_ * sizeof(float));
    double sum = 0.0;
    for (float loss : losses) sum += loss;
    return sum / static_cast<double>(losses.size());
}

void NormGradientPack::allocate(ActivationArena& arena, std::size_t floats) { pack_ = arena.floats_or_null(floats); }

void NormGradientPack::begin(int tensors) {
    if (tp_.sequence_parallel()) ops_.fill(pack_, 0.0f, static_cast<std::size_t>(tensors) * channels_);
}

float* NormGradientPack::gradient(float* whole, int slot) const {
    return tp_.sequence_parallel() ? pack_ + static_cast<std::size_t>(slot) * channels_ : whole;
}

void NormGradientPack::finish(std::initializer_list<float*> wholes) {
    if (!tp_.sequence_parallel()) return;
    tp_.allreduce_sum(pack_, wholes.size() * channels_);
    std::size_t slot = 0;
    for (float* whole : wholes) ops_.add_inplace(whole, pack_ + slot++ * channels_, channels_);
}

}  // namespace parbench

// All-to-all context parallelism (Jacobs et al., DeepSpeed-Ulysses, arXiv 2309.14509, sec. 3):
// q, k, v arrive sequence-sharded, (B, T/c, H hs) in context_positions() order; an all-to-all
// per tensor reshards them to head-sharded over the whole sequence, (B, T, H/c hs) in natural
// position order (so both balances work: every rank's tokens are put where
// context_positions() says they belong); every rank runs the ordinary causal GQA attention on
// its heads; a last all-to-all reshards the output back.
//
// Heads: rank r computes query heads [r n, (r+1) n), n = NH / c (NH must divide by c, else
// UsageError). Key/value heads follow theory/context_traffic.hpp's alltoall_kv_window: when c
// divides NKV each rank receives its NKV / c of them; when it does not (fewer key/value heads
// than ranks, or heads replicated by tensor parallelism), each rank receives the window of
// key/value heads its query heads read, the same width on every rank, so a key/value head may
// go to several ranks and its gradient comes back summed.
//
// Saved for backward: the head-sharded q, k and v (B, T, (n + 2 m) hs floats, m the key/value
// window), so backward needs no second all-to-all of them; the probabilities, (B, n, T, T), are
// not kept but recomputed in backward from the saved q and k (a second forward pass on this
// rank, counted in score_elements). Workspace: the all-to-all buffers, the head-sharded
// output and gradients, and three (B, n, T, T) score tiles.
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "theory/context_attention_buffers.hpp"
#include "theory/context_traffic.hpp"
#include "train/context/context_attention_style.hpp"

namespace parbench::detail {
namespace {

class AlltoallAttention final : public ContextAttentionStyle {
  public:
    AlltoallAttention(Communicator& cp, Ops& ops, MemoryLedger& ledger, const ContextSplit& split,
                      const GqaShape& local, int full_seq_len)
        : cp_(cp), ops_(ops), split_(split), local_(local) {
        const int c = split.size;
        if (local.NH % c != 0)
            throw UsageError("--cp-style alltoall needs the attention heads per tensor-parallel rank (" +
                             std::to_string(local.NH) + ") to divide by --cp " + std::to_string(c) +
                             "; use --cp-style ring, or a --cp that divides " + std::to_string(local.NH));
        const ContextAttentionShape shape = context_attention_shape(local, c, split.style);
        for (int rank = 0; rank < c; ++rank) windows_.push_back(alltoall_kv_window(shape, rank));
        chunks_of_rank_ = chunks_of_every_rank(full_seq_len, split);
        query_heads_ = local.NH / c;
        const KvHeadWindow own = windows_[split.rank];
        heads_ = GqaShape{local.B, full_seq_len, query_heads_, own.count, local.hs,
                          // kv_head(h) = (first query head + h) / queries_per_kv - own.first,
                          // the index into the received window
                          local.first_query_head + split.rank * query_heads_ - own.first * local.queries_per_kv,
                          local.queries_per_kv};
        // The sizes from the table the memory theory sums (theory/context_attention_buffers.hpp).
        const AlltoallAttentionBuffers table = alltoall_attention_buffers(local, split, full_seq_len);
        saved_floats_ = table.saved();
        workspace_ = ledger.allocate(MemoryCategory::activations, sizeof(float) * table.workspace());
        WorkspaceParts parts(workspace_);
        send_ = parts.take(table.exchange);
        recv_ = parts.take(table.exchange);
        out_heads_ = parts.take(table.query_heads);
        dout_heads_ = parts.take(table.query_heads);
        dq_heads_ = parts.take(table.query_heads);
        dk_heads_ = parts.take(table.kv_heads);
        dv_heads_ = parts.take(table.kv_heads);
        preatt_ = parts.take(table.scores);  // backward: dpreatt
        att_ = parts.take(table.scores);
        datt_ = parts.take(table.scores);
    }

    std::size_t saved_floats() const override { return saved_floats_; }

    void forward(float* out, float* saved, const float* q, const float* k, const float* v) override {
        float* q_heads = saved;
        float* k_heads = q_heads + heads_.q_elements();
        float* v_heads = k_heads + heads_.kv_elements();
        to_heads(q_heads, q, query_head_group(), local_.NH);
        to_heads(k_heads, k, kv_head_window(), local_.NKV);
        to_heads(v_heads, v, kv_head_window(), local_.NKV);
        {
            ComputeTimer timer(ops_, counters.compute_ms);
            ops_.gqa_attention_forward(out_heads_, preatt_, att_, q_heads, k_heads, v_heads, heads_);
            counters.score_elements += visible_scores();
        }
        to_sequence(out, out_heads_, query_head_group(), local_.NH, Arrive::overwrite);
    }

    void backward(float* dq, float* dk, float* dv, const float* dout, const float* /*out*/, const float* saved,
                  const float* /*q*/, const float* /*k*/, const float* /*v*/) override {
        const float* q_heads = saved;
        const float* k_heads = q_heads + heads_.q_elements();
        const float* v_heads = k_heads + heads_.kv_elements();
        to_heads(dout_heads_, dout, query_head_group(), local_.NH);
        {
            ComputeTimer timer(ops_, counters.compute_ms);
            ops_.gqa_attention_forward(out_heads_, preatt_, att_, q_heads, k_heads, v_heads, heads_);
            ops_.fill(dq_heads_, 0.0f, heads_.q_elements());
            ops_.fill(dk_heads_, 0.0f, heads_.kv_elements());
            ops_.fill(dv_heads_, 0.0f, heads_.kv_elements());
            ops_.gqa_attention_backward(dq_heads_, dk_heads_, dv_heads_, preatt_, datt_, dout_heads_, q_heads,
                                        k_heads, v_heads, att_, heads_);
            counters.score_elements += 2 * visible_scores();  // the recomputed forward and the backward
        }
        to_sequence(dq, dq_heads_, query_head_group(), local_.NH, Arrive::add);
        to_sequence(dk, dk_heads_, kv_head_window(), local_.NKV, Arrive::add);
        to_sequence(dv, dv_heads_, kv_head_window(), local_.NKV, Arrive::add);
    }

  private:
    // The heads rank p handles: first head and count, in the numbering of the local tensors.
    struct HeadGroup {
        std::vector<int> first;
        int count = 0;
    };
    enum class Arrive { overwrite, add };

    HeadGroup query_head_group() const {
        HeadGroup group{{}, query_heads_};
        for (int p = 0; p < split_.size; ++p) group.first.push_back(p * query_heads_);
        return group;
    }
    HeadGroup kv_head_window() const {
        HeadGroup group{{}, windows_.front().count};
        for (const KvHeadWindow& window : windows_) group.first.push_back(window.first);
        return group;
    }

    std::size_t local_tokens_elements(int heads) const {
        return static_cast<std::size_t>(local_.B) * local_.T * heads * local_.hs;
    }
    std::size_t visible_scores() const {
        return static_cast<std::size_t>(heads_.B) * heads_.NH * heads_.T * (heads_.T + 1) / 2;
    }

    // whole (B, T, group.count hs), natural order <- this rank's tokens of every rank's head group
    // from `local` (B, T/c, H hs).
    void to_heads(float* whole, const float* local, const HeadGroup& group, int H) {
        const std::size_t hs = local_.hs, width = group.count * hs, block = local_tokens_elements(group.count);
        {
            ComputeTimer timer(ops_, counters.compute_ms);
            for (int p = 0; p < split_.size; ++p)
                ops_.copy_rows(send_ + p * block, width, local + group.first[p] * hs, H * hs, width,
                               static_cast<std::size_t>(local_.B) * local_.T);
        }
        exchange(block);
        ComputeTimer timer(ops_, counters.compute_ms);
        for (int p = 0; p < split_.size; ++p) for_each_chunk(p, [&](std::size_t local_offset, std::size_t whole_offset,
                                                                     std::size_t chunk_tokens) {
            // one row per sequence: rank p's chunk of it
            ops_.copy_rows(whole + whole_offset * width, heads_.T * width, recv_ + p * block + local_offset * width,
                           local_.T * width, chunk_tokens * width, local_.B);
        });
    }

    // The reverse: every rank's tokens of this rank's head group go home, to `local`'s columns
    // of that group (overwritten, or added to for gradients).
    void to_sequence(float* local, const float* whole, const HeadGroup& group, int H, Arrive arrive) {
        const std::size_t hs = local_.hs, width = group.count * hs, block = local_tokens_elements(group.count);
        {
            ComputeTimer timer(ops_, counters.compute_ms);
            for (int p = 0; p < split_.size; ++p) for_each_chunk(p, [&](std::size_t local_offset,
                                                                         std::size_t whole_offset,
                                                                         std::size_t chunk_tokens) {
                ops_.copy_rows(send_ + p * block + local_offset * width, local_.T * width,
                               whole + whole_offset * width, heads_.T * width, chunk_tokens * width, local_.B);
            });
        }
        exchange(block);
        ComputeTimer timer(ops_, counters.compute_ms);
        const std::size_t rows = static_cast<std::size_t>(local_.B) * local_.T;
        for (int p = 0; p < split_.size; ++p) {
            float* target = local + group.first[p] * hs;
            if (arrive == Arrive::overwrite)
                ops_.copy_rows(target, H * hs, recv_ + p * block, width, width, rows);
            else
                ops_.add_rows(target, H * hs, recv_ + p * block, width, width, rows);
        }
    }

    // Rank p's chunks: (token offset in p's local order, token offset in the whole sequence, tokens).
    template <typename Visit>
    void for_each_chunk(int p, Visit visit) const {
        const ContextChunks& chunks = chunks_of_rank_[p];
        for (std::size_t i = 0; i < chunks.index.size(); ++i)
            visit(i * chunks.length, static_cast<std::size_t>(chunks.index[i]) * chunks.length,
                  static_cast<std::size_t>(chunks.length));
    }

    // send_ -> recv_, `block` floats per peer. One rank keeps its block.
    void exchange(std::size_t block) {
        const int c = split_.size;
        if (c == 1) {
            ComputeTimer timer(ops_, counters.compute_ms);
            ops_.copy_rows(recv_, block, send_, block, block, 1);
            return;
        }
        const auto start = std::chrono::steady_clock::now();
        cp_.alltoall(send_, recv_, block, DType::float32);
        cp_.synchronize();
        counters.wait_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        counters.bytes_sent += block * (c - 1) * sizeof(float);
        counters.messages += 1;
    }

    Communicator& cp_;
    Ops& ops_;
    ContextSplit split_;
    GqaShape local_;
    GqaShape heads_;  // this rank's head-sharded whole-sequence attention
    int query_heads_ = 1;
    std::vector<KvHeadWindow> windows_;         // by rank
    std::vector<ContextChunks> chunks_of_rank_;  // by rank
    std::size_t saved_floats_ = 0;
    Buffer workspace_;
    float* send_ = nullptr;
    float* recv_ = nullptr;
    float* out_heads_ = nullptr;
    float* dout_heads_ = nullptr;
    float* dq_heads_ = nullptr;
    float* dk_heads_ = nullptr;
    float* dv_heads_ = nullptr;
    float* preatt_ = nullptr;
    float* att_ = nullptr;
    float* datt_ = nullptr;
};

}  // namespace

std::unique_ptr<ContextAttentionStyle> make_alltoall_attention(Communicator& cp, Ops& ops, MemoryLedger& ledger,
                                                               const ContextSplit& split, const GqaShape& local,
                                                               int full_seq_len) {
    return std::make_unique<AlltoallAttention>(cp, ops, ledger, split, local, full_seq_len);
}

}  // namespace parbench::detail

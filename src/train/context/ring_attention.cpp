// Ring attention (Liu et al., arXiv 2310.01889, sec. 3; the form Megatron-core's context
// parallelism uses). Rank r of c holds its queries and, at step s = 0..c-1, the K/V block of
// rank (r - s) mod c. Each step first starts the K/V block's transfer to rank r+1 and the next
// block's from rank r-1 (isend/irecv), then computes the local queries against the block it
// holds, merging with the online-softmax rescaling, and only then waits: the transfer overlaps
// the math. Causality is decided per pair of chunks from their positions in the sequence: a
// key chunk before the query chunk is attended fully, the same chunk causally (its diagonal),
// a later one not at all.
//
// Backward mirrors it (FlashAttention-2's backward per block pair, P recomputed from the
// saved log-sum-exp): K/V travel the same way, and with each block travels the dK/dV
// accumulated for it by the ranks that held it before. Step s computes this rank's part of
// the held block's dK/dV into a fresh buffer, then waits for the accumulator of that block
// from rank r-1, adds its part and passes it on to rank r+1; after c steps each block's
// accumulator has visited every rank, and the last hop brings it home to its owner, which adds
// it into dk, dv. Messages per layer and micro-batch: forward 2(c-1) sends of a K or V block
// (B, T/c, NKV*hs); backward 2(c-1) of K/V and 2c of dK/dV (theory/context_traffic.hpp).
//
// Saved for backward: the log-sum-exp of every local query row, (B, T/c, NH) floats; the
// model passes `out` back in. Messages between a pair of ranks are matched in the order they
// were posted (MPI's and NCCL's point-to-point ordering), which both sides keep identical.
#include <array>
#include <limits>
#include <vector>

#include "core/dtype.hpp"
#include "theory/context_attention_buffers.hpp"
#include "train/context/context_attention_style.hpp"

namespace parbench::detail {
namespace {

class RingAttention final : public ContextAttentionStyle {
  public:
    RingAttention(Communicator& cp, Ops& ops, MemoryLedger& ledger, const ContextSplit& split, const GqaShape& local,
                  int full_seq_len)
        : cp_(cp),
          ops_(ops),
          split_(split),
          local_(local),
          chunks_(context_chunks(full_seq_len, split)),
          chunks_of_rank_(chunks_of_every_rank(full_seq_len, split)) {
        // The sizes from the table the memory theory sums (theory/context_attention_buffers.hpp).
        const RingAttentionBuffers table = ring_attention_buffers(local_, split_, full_seq_len);
        saved_floats_ = table.saved;
        workspace_ = ledger.allocate(MemoryCategory::activations, sizeof(float) * table.workspace());
        WorkspaceParts parts(workspace_);
        for (auto& block : received_k_) block = parts.take(table.kv_block);
        for (auto& block : received_v_) block = parts.take(table.kv_block);
        part_out_ = parts.take(table.partial_out);
        part_max_ = parts.take(table.statistics);
        part_sum_ = parts.take(table.statistics);
        row_max_ = parts.take(table.statistics);  // backward: D = rowsum(dout * out)
        row_sum_ = parts.take(table.statistics);
        scores_ = parts.take(table.scores);
        dk_part_ = parts.take(table.gradient_part);
        dv_part_ = parts.take(table.gradient_part);
        for (auto& block : dk_accumulated_) block = parts.take(table.accumulated);
        for (auto& block : dv_accumulated_) block = parts.take(table.accumulated);
    }

    std::size_t saved_floats() const override { return saved_floats_; }

    void forward(float* out, float* saved, const float* q, const float* k, const float* v) override {
        {
            ComputeTimer timer(ops_, counters.compute_ms);
            ops_.fill(out, 0.0f, local_.q_elements());
            ops_.fill(row_max_, -std::numeric_limits<float>::infinity(), stat_elements());
            ops_.fill(row_sum_, 0.0f, stat_elements());
        }
        const float* held_k = k;
        const float* held_v = v;
        for (int step = 0; step < size(); ++step) {
            std::array<Request, 4> transfers;
            if (step + 1 < size()) start_kv_transfer(transfers, held_k, held_v, step);
            {
                ComputeTimer timer(ops_, counters.compute_ms);
                for_each_block_pair(step, [&](const AttentionBlock& block) {
                    ops_.block_attention_forward(part_out_, part_max_, part_sum_, scores_, q, held_k, held_v, block);
                    ops_.block_attention_merge(out, row_max_, row_sum_, part_out_, part_max_, part_sum_, block);
                });
            }
            wait_all(transfers, counters.wait_ms);
            held_k = received_k_[step % 2];
            held_v = received_v_[step % 2];
        }
        ComputeTimer timer(ops_, counters.compute_ms);
        ops_.block_attention_finish(out, saved, row_max_, row_sum_, stat_elements(), local_.hs);
    }

    void backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* saved,
                  const float* q, const float* k, const float* v) override {
        const float* lse = saved;
        float* delta = row_max_;
        const std::size_t kv = local_.kv_elements();
        {
            ComputeTimer timer(ops_, counters.compute_ms);
            ops_.block_attention_delta(delta, dout, out, stat_elements(), local_.hs);
        }
        if (size() == 1) {
            ComputeTimer timer(ops_, counters.compute_ms);
            for_each_block_pair(0, [&](const AttentionBlock& block) {
                ops_.block_attention_backward(dq, dk, dv, scores_, dout, q, k, v, lse, delta, block);
            });
            return;
        }
        const float* held_k = k;
        const float* held_v = v;
        std::array<Request, 4> accumulated;  // dK/dV on to rank r+1 and in from rank r-1
        for (int step = 0; step < size(); ++step) {
            std::array<Request, 4> transfers;
            if (step + 1 < size()) start_kv_transfer(transfers, held_k, held_v, step);
            // Step 0's block is this rank's own: nothing has accumulated for it yet, so its part
            // is the accumulator. Later steps compute a part and add it to what arrives.
            float* dk_target = step == 0 ? dk_accumulated_[0] : dk_part_;
            float* dv_target = step == 0 ? dv_accumulated_[0] : dv_part_;
            {
                ComputeTimer timer(ops_, counters.compute_ms);
                ops_.fill(dk_target, 0.0f, kv);
                ops_.fill(dv_target, 0.0f, kv);
                for_each_block_pair(step, [&](const AttentionBlock& block) {
                    ops_.block_attention_backward(dq, dk_target, dv_target, scores_, dout, q, held_k, held_v, lse,
                                                  delta, block);
                });
            }
            float* dk_acc = dk_accumulated_[step % 2];
            float* dv_acc = dv_accumulated_[step % 2];
            // The accumulator of the held block has arrived, and the previous send, whose
            // buffers the next receive reuses, has left.
            wait_all(accumulated, counters.wait_ms);
            if (step > 0) {
                ComputeTimer timer(ops_, counters.compute_ms);
                ops_.add_inplace(dk_acc, dk_part_, kv);
                ops_.add_inplace(dv_acc, dv_part_, kv);
            }
            // After the last step this receives this rank's own block's finished dK/dV.
            start_ring_shift(accumulated, dk_acc, dv_acc, dk_accumulated_[(step + 1) % 2],
                             dv_accumulated_[(step + 1) % 2]);
            wait_all(transfers, counters.wait_ms);
            held_k = received_k_[step % 2];
            held_v = received_v_[step % 2];
        }
        wait_all(accumulated, counters.wait_ms);
        ComputeTimer timer(ops_, counters.compute_ms);
        ops_.add_inplace(dk, dk_accumulated_[size() % 2], kv);
        ops_.add_inplace(dv, dv_accumulated_[size() % 2], kv);
    }

  private:
    int size() const { return split_.size; }
    int next_rank() const { return (split_.rank + 1) % size(); }
    int previous_rank() const { return (split_.rank + size() - 1) % size(); }
    std::size_t stat_elements() const { return static_cast<std::size_t>(local_.B) * local_.T * local_.NH; }

    Request send(const float* block, int peer) {
        const std::size_t kv = local_.kv_elements();
        counters.bytes_sent += kv * sizeof(float);
        counters.messages += 1;
        return cp_.isend(block, kv, DType::float32, peer);
    }

    // Starts sending two blocks to rank r+1 and receiving two from rank r-1 (into `requests`,
    // which must hold no pending request). On NCCL the calls run in issue order on one stream
    // and a send completes only against its receive, so a ring in which every rank sent first
    // (or received first) would wait on itself: even ranks send first and odd ranks receive
    // first, which breaks the cycle for any c. MPI matches messages per sender in the order
    // they were sent, which this keeps the same on both sides.
    void start_ring_shift(std::array<Request, 4>& requests, const float* send_first, const float* send_second,
                          float* receive_first, float* receive_second) {
        const std::size_t kv = local_.kv_elements();
        const auto sends = [&] {
            requests[0] = send(send_first, next_rank());
            requests[1] = send(send_second, next_rank());
        };
        const auto receives = [&] {
            requests[2] = cp_.irecv(receive_first, kv, DType::float32, previous_rank());
            requests[3] = cp_.irecv(receive_second, kv, DType::float32, previous_rank());
        };
        if (split_.rank % 2 == 0) {
            sends();
            receives();
        } else {
            receives();
            sends();
        }
    }

    // The held K/V block on to rank r+1, step+1's from rank r-1 into the buffers of this step's
    // parity (the other pair is the one held, or the caller's k and v at step 0).
    void start_kv_transfer(std::array<Request, 4>& transfers, const float* held_k, const float* held_v, int step) {
        start_ring_shift(transfers, held_k, held_v, received_k_[step % 2], received_v_[step % 2]);
    }

    // Every (local query chunk, held key chunk) pair that is not wholly in the future, as the
    // block the ops compute; the held block at `step` is rank (r - step) mod c's.
    template <typename Compute>
    void for_each_block_pair(int step, Compute compute) {
        const ContextChunks& held = chunks_of_rank_[(split_.rank - step + size()) % size()];
        const int L = chunks_.length;
        for (std::size_t qi = 0; qi < chunks_.index.size(); ++qi)
            for (std::size_t kj = 0; kj < held.index.size(); ++kj) {
                const int query_chunk = chunks_.index[qi], key_chunk = held.index[kj];
                if (key_chunk > query_chunk) continue;
                const AttentionBlock block =
                    attention_block(local_, static_cast<int>(qi) * L, L, static_cast<int>(kj) * L, L,
                                    key_chunk == query_chunk ? BlockMask::causal : BlockMask::full);
                compute(block);
                counters.score_elements += block.visible_scores();
            }
    }

    Communicator& cp_;
    Ops& ops_;
    ContextSplit split_;
    GqaShape local_;
    ContextChunks chunks_;                        // this rank's
    std::vector<ContextChunks> chunks_of_rank_;  // every rank's, by rank
    std::size_t saved_floats_ = 0;
    Buffer workspace_;
    std::array<float*, RingAttentionBuffers::received_blocks> received_k_{}, received_v_{};
    std::array<float*, RingAttentionBuffers::accumulators> dk_accumulated_{}, dv_accumulated_{};
    float* part_out_ = nullptr;
    float* part_max_ = nullptr;
    float* part_sum_ = nullptr;
    float* row_max_ = nullptr;
    float* row_sum_ = nullptr;
    float* scores_ = nullptr;
    float* dk_part_ = nullptr;
    float* dv_part_ = nullptr;
};

}  // namespace

std::unique_ptr<ContextAttentionStyle> make_ring_attention(Communicator& cp, Ops& ops, MemoryLedger& ledger,
                                                           const ContextSplit& split, const GqaShape& local,
                                                           int full_seq_len) {
    return std::make_unique<RingAttention>(cp, ops, ledger, split, local, full_seq_len);
}

}  // namespace parbench::detail

#include "theory/engine_attention.hpp"

#include "core/error.hpp"
#include "kernels/block_attention_math.hpp"

namespace parbench {

AttentionKind engine_attention(const std::string& requested, bool backend_tiles_block_attention, int seq_len, int cp) {
    if (requested != "auto" && requested != "flash" && requested != "naive")
        throw UsageError("--attention '" + requested +
                         "': use auto (block attention from " + std::to_string(block_attention_min_seq_len) +
                         " tokens where the backend tiles it), flash (block attention, no s x s scores kept) or "
                         "naive (scores materialised)");
    if (cp > 1) {
        if (requested != "auto")
            throw UsageError("--attention " + requested + " with --cp " + std::to_string(cp) +
                             ": context parallelism always attends block by block (ring or all-to-all); drop "
                             "--attention or --cp");
        return AttentionKind::naive;  // the whole-sequence choice does not apply: ContextAttention's
    }
    if (requested == "flash" && !backend_tiles_block_attention)
        throw UsageError("--attention flash: this backend's block kernels (CUDA) write the whole B x NH x T x T "
                         "score tile, so block attention would keep as much as the standard one; use --attention "
                         "naive or auto on a GPU");
    if (requested == "flash") return AttentionKind::flash;
    if (requested == "naive") return AttentionKind::naive;
    return backend_tiles_block_attention && seq_len >= block_attention_min_seq_len ? AttentionKind::flash
                                                                                   : AttentionKind::naive;
}

SequenceAttentionFloats sequence_attention_floats(const GqaShape& local) {
    const AttentionBlock block = attention_block(local, 0, local.T, 0, local.T, BlockMask::causal);
    return {block.query_rows(), 2 * block.query_rows() + 2 * block.sub_block_tile_elements()};
}

}  // namespace parbench

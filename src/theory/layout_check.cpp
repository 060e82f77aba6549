#include "theory/layout_check.hpp"

#include <string>

#include "core/error.hpp"

namespace parbench {
namespace {

std::string text(int value) { return std::to_string(value); }

}  // namespace

// The splits tensor parallelism makes must come out even (Megatron-LM sec. 3): heads, the
// hidden and FFN widths, the vocabulary, and under SP the tokens of a sequence.
void check_tensor_split(const ModelConfig& m, int tp, bool sp, TensorParallelStyle style, int local_seq, int cp) {
    const std::string flag = "--tp " + text(tp);
    auto divides = [&](int extent, const std::string& what, const std::string& fix) {
        if (extent % tp != 0)
            throw UsageError(flag + ": " + what + " " + text(extent) + " of model " + m.name + " does not split " +
                             text(tp) + " ways; " + fix);
    };
    if (m.kind == ModelKind::mlp) {
        if (sp)
            throw UsageError("--sp splits sequences, and model " + m.name + " is an MLP, which has none; drop --sp");
        divides(m.hidden, "hidden size", "use a --tp that divides it");
        return;
    }
    if (style == TensorParallelStyle::allgather)
        throw UsageError("--tp-style allgather applies to MLP models; " + model_kind_name(m.kind) +
                         " blocks use Megatron's column/row pairing: drop --tp-style or use an mlp model");
    divides(m.heads, "head count", "use a --tp that divides it (attention heads are split across the group)");
    divides(m.hidden, "hidden size", "use a --tp that divides it");
    // Llama's key/value heads are split when --tp divides them and replicated otherwise
    // (models/llama.cpp), so they need no check.
    if (m.kind == ModelKind::llama)
        divides(m.ffn_hidden, "SwiGLU width (ffn_hidden)", "use a --tp that divides it");
    else
        divides(4 * m.hidden, "FFN size", "use a --tp that divides it");
    divides(m.vocab, "vocabulary", "use a --tp that divides it (the embedding and logits are split by vocabulary)");
    // Under context parallelism a rank holds seq / cp tokens of each sequence, and SP splits those.
    if (sp && local_seq % tp != 0)
        throw UsageError("--sp: sequence length " + text(local_seq) + (cp > 1 ? " per --cp rank" : "") +
                         " does not split " + text(tp) + " ways across --tp " + text(tp) +
                         "; use a --seq that is a multiple of " + text(tp * cp));
}

}  // namespace parbench

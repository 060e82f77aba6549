#include "theory/layer_work.hpp"

#include <stdexcept>

#include "core/error.hpp"

namespace parbench {
namespace {

// The backward of an element-wise op moves 3 tensors (saved input, incoming and outgoing
// gradient) where its forward moves 2 (layer_work.hpp).
constexpr double backward_memory_factor = 1.5;

// A linear layer y = x W (x: tokens x in, W: in x out): its forward product, and the two of its
// backward, dx = dy W^T (input gradient) and dW = x^T dy (weight gradient).
void add_linear(LayerWork& work, const std::string& name, double tokens, double in, double out, double e) {
    work.forward.gemms.push_back({name, tokens, out, in, 1, e});
    work.input_grad.gemms.push_back({name + " dx", tokens, in, out, 1, e});
    work.weight_grad.gemms.push_back({name + " dW", in, out, tokens, 1, e, GemmRole::linear_weight_grad});
}

// Bytes per element that eager PyTorch moves for torchtitan's Llama code (torchtitan/models/norms.py
// RMSNorm and models/llama/model.py apply_rotary_emb and FeedForward, at the commit of its 2024-12
// H100 benchmark, 9dec370), each op its own kernel reading its inputs from HBM and writing its
// output, e the activations' bytes. The upcast and downcast are no-ops (no kernel) in fp32.
// RMSNorm, x * rsqrt(x.float().pow(2).mean(-1) + eps) cast back, times the gain: x.float() (read e,
// write 4), pow (4, 4), mean (read 4; its output is a row), x * rsqrt (4, 4), type_as (4, e),
// * weight (e, e): 36 B at bf16 where one fused kernel reads e and writes e.
double eager_rms_norm_bytes(double e) {
    const double cast = e < 4.0 ? e + 4.0 : 0.0;
    return cast + 8.0 + 4.0 + 8.0 + cast + 2.0 * e;
}
// RoPE on q or k: .float() (e, 4), the complex product with the cached rotation (4, 4; the
// rotation is one row per position, read once), type_as (4, e): 20 B at bf16, fused 2e.
double eager_rope_bytes(double e) {
    const double cast = e < 4.0 ? e + 4.0 : 0.0;
    return cast + 8.0 + cast;
}
// SwiGLU per element of the gate: silu (e, e), then the product with up (2e, e): 5e, fused 3e.
double eager_swiglu_bytes(double e) { return 5.0 * e; }

// torchtitan's op-level selective checkpointing (theory/activation_memory.hpp) on a Llama block at
// tp 1: of the seven products in forward order, wq, wk, wv, wo, w1 (gate), w3 (up), w2 (down), the
// policy counts each aten.mm and recomputes every second one, wk, wo and w3; the attention kernel's
// output is saved, so flash attention's forward is not repeated. Every element-wise op runs again,
// up to down's input (the product), the last tensor the block's backward needs: all of the
// forward's element-wise traffic but the second residual add, whose output nothing in the
// backward reads (non-reentrant checkpointing stops recomputing there).
PassWork op_level_recompute(const LayerWorkShape& shape, double forward_memory_bytes) {
    const ModelConfig& model = shape.model;
    if (model.kind != ModelKind::llama || shape.tp != 1 || !shape.mlp)
        throw std::logic_error("op_level_recompute: selective-op is priced for dense Llama layers at tp 1 "
                               "(theory/layout.cpp refuses the rest)");
    const double h = model.hidden, kv = model.kv_heads * (h / model.heads), f = model.ffn_hidden;
    const double tokens = shape.micro * shape.seq, e = shape.element_bytes;
    PassWork pass;
    pass.gemms = {{"wk (recomputed, op-level)", tokens, kv, h, 1, e},
                  {"wo (recomputed, op-level)", tokens, h, h, 1, e},
                  {"w3 up (recomputed, op-level)", tokens, f, h, 1, e}};
    pass.memory_bytes = forward_memory_bytes - 3.0 * tokens * h * e;
    return pass;
}

}  // namespace

AttentionKind parse_attention(const std::string& name) {
    if (name == "flash") return AttentionKind::flash;
    if (name == "naive") return AttentionKind::naive;
    throw UsageError("--attention '" + name + "': use flash (no s x s scores kept) or naive (scores materialised)");
}

std::string attention_name(AttentionKind attention) { return attention == AttentionKind::flash ? "flash" : "naive"; }

double PassWork::flops() const {
    double total = 0;
    for (const Gemm& g : gemms) total += g.flops();
    return total;
}

void PassWork::add(const PassWork& other) {
    gemms.insert(gemms.end(), other.gemms.begin(), other.gemms.end());
    memory_bytes += other.memory_bytes;
}

LayerWork transformer_layer_work(const LayerWorkShape& shape, AttentionKind attention, Recompute recompute) {
    const ModelConfig& model = shape.model;
    const bool llama = model.kind == ModelKind::llama;
    const double t = shape.tp, h = model.hidden, heads = model.heads;
    const double head_dim = h / heads;
    const double kv = llama && model.kv_heads > 0 ? model.kv_heads * head_dim : h;
    const double ffn = !shape.mlp ? 0.0 : llama ? model.ffn_hidden : 4.0 * h;
    const double tokens = shape.micro * shape.seq;
    const double e = shape.element_bytes;
    LayerWork work;

    // GEMMs on this rank: column-parallel QKV and first MLP matrix (outputs / t), row-parallel
    // attention projection and second MLP matrix (inputs / t), Megatron-LM's split.
    add_linear(work, "qkv", tokens, h, (h + 2.0 * kv) / t, e);
    add_linear(work, "attention projection", tokens, h / t, h, e);
    add_linear(work, "mlp up", tokens, h, (llama ? 2.0 : 1.0) * ffn / t, e);
    add_linear(work, "mlp down", tokens, ffn / t, h, e);

    // Attention core: per local head, scores Q K^T (seq x keys x head_dim) and P V.
    const double local_heads = shape.micro * heads / t;
    const Gemm scores{"attention scores", shape.seq, shape.keys, head_dim, local_heads, e, GemmRole::attention};
    const Gemm values{"attention values", shape.seq, head_dim, shape.keys, local_heads, e, GemmRole::attention};
    const double score_elements = local_heads * shape.seq * shape.keys;
    PassWork core;  // the forward of the core, as selective recompute repeats it
    if (attention == AttentionKind::flash) {
        Gemm s = scores, v = values;
        s.count *= 0.5;  // causal: the blocks above the diagonal are skipped
        v.count *= 0.5;
        s.element_bytes = v.element_bytes = 0;  // fused: the score tiles stay on chip
        s.role = v.role = GemmRole::fused_attention_forward;
        core.gemms = {s, v};
        work.forward.add(core);
        // Backward: the scores again, then dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q.
        Gemm again = s;
        again.role = GemmRole::fused_attention_backward;
        again.name += " (recomputed in backward)";
        work.input_grad.gemms.push_back(again);
        for (const char* name : {"attention dP", "attention dV", "attention dQ", "attention dK"}) {
            Gemm g = again;
            g.name = name;
            work.input_grad.gemms.push_back(g);
        }
    } else {
        core.gemms = {scores, values};
        // Fused scale-mask-softmax reads and writes the scores; dropout on the probabilities
        // reads and writes them and writes a 1-byte mask (GPT; Llama has no attention dropout).
        core.memory_bytes = 2.0 * score_elements * e + (llama ? 0.0 : 2.0 * score_elements * e + score_elements);
        work.forward.add(core);
        for (const char* name : {"attention dP", "attention dV", "attention dQ", "attention dK"}) {
            Gemm g = scores;
            g.name = name;
            work.input_grad.gemms.push_back(g);
        }
        work.input_grad.memory_bytes += backward_memory_factor * core.memory_bytes;
    }

    // Element-wise work on the hidden state: on every token of the tp group (each tp rank
    // repeats it) unless sequence parallelism splits it t ways (arXiv 2205.05198 sec. 4.2.2).
    const double hidden_elements = tokens * h / (shape.sp ? t : 1.0);
    const double ffn_elements = tokens * ffn / t;
    double memory = 0;
    if (llama && shape.eager_elementwise) {
        memory += 2 * eager_rms_norm_bytes(e) * hidden_elements;     // two RMSNorms, op by op (above)
        memory += 2 * (3.0 * hidden_elements * e);                   // two residual adds: one kernel each already
        memory += eager_swiglu_bytes(e) * ffn_elements;
        memory += eager_rope_bytes(e) * tokens * (h + kv) / t;
    } else if (llama) {
        memory += 2 * (2.0 * hidden_elements * e);                   // two RMSNorms: read, write
        memory += 2 * (3.0 * hidden_elements * e);                   // two residual adds: read 2, write 1
        memory += 3.0 * ffn_elements * e;                            // SwiGLU: read gate and up, write
        memory += 2.0 * tokens * (h + kv) / t * e;                   // RoPE on q and k: read, write
    } else {
        memory += 2 * (2.0 * hidden_elements * e);                   // two LayerNorms: read, write
        memory += 2 * (3.0 * hidden_elements * e + hidden_elements); // two bias-dropout-adds: read 2, write 1, mask
        memory += 2.0 * ffn_elements * e;                            // bias + GeLU: read, write
    }
    work.forward.memory_bytes += memory;
    work.input_grad.memory_bytes += backward_memory_factor * memory;

    if (recompute == Recompute::full) {
        work.recompute = work.forward;  // the whole forward again before the backward
    } else if (recompute == Recompute::selective_op) {
        work.recompute = op_level_recompute(shape, memory);
    } else if (recompute == Recompute::selective && attention == AttentionKind::naive) {
        work.recompute = core;  // the attention core only (arXiv 2205.05198 sec. 5)
    }
    // Selective recompute under flash attention repeats nothing flash does not already redo.
    return work;
}

LayerWork mlp_layer_work(const LayerWorkShape& shape) {
    // One linear layer of width h on micro-batch samples (its weight split t ways, Megatron's
    // column/row alternation) and the GELU after it: read, write (train/models/mlp.hpp).
    const double samples = shape.micro, h = shape.model.hidden, e = shape.element_bytes;
    LayerWork work;
    add_linear(work, "linear", samples, h, h / shape.tp, e);
    work.forward.memory_bytes = 2.0 * samples * h / shape.tp * e;
    work.input_grad.memory_bytes = backward_memory_factor * work.forward.memory_bytes;
    return work;
}

LayerWork head_work(const LayerWorkShape& shape) {
    const double tokens = shape.micro * shape.seq, h = shape.model.hidden, e = shape.element_bytes;
    LayerWork work;
    add_linear(work, "logits", tokens, h, shape.model.vocab / static_cast<double>(shape.tp), e);
    const double hidden_elements = tokens * h / (shape.sp ? shape.tp : 1.0);
    const double logit_elements = tokens * shape.model.vocab / shape.tp;
    // Final norm: read, write. Vocabulary-parallel cross-entropy in fp32: read the logits, write
    // the exponentials, read them for the sum (3 passes of 4 bytes); its backward writes the
    // gradient of the logits.
    double forward_loss = 3.0 * 4.0, backward_loss = 2.0 * 4.0;
    if (shape.framework_loss) {
        // Megatron-core's unfused vocab-parallel cross-entropy (megatron/core/tensor_parallel/
        // cross_entropy.py, the default without --cross-entropy-loss-fusion), one pass per op over
        // the logits: cast to fp32 (read e, write 4; none when they are fp32 already), max (read),
        // subtract the max in place, exp in place (read, write each), sum (read), divide in place
        // (read, write); backward: multiply by the loss's gradient in place (read, write) and the
        // cast's backward to the logits' type (read 4, write e). torch's cross_entropy on fp32 logits
        // (torchtitan) makes about as many passes.
        const double cast = e < 4.0 ? e + 4.0 : 0.0;
        forward_loss = cast + 4.0 + 8.0 + 8.0 + 4.0 + 8.0;
        backward_loss = 8.0 + cast;
    }
    work.forward.memory_bytes = 2.0 * hidden_elements * e + forward_loss * logit_elements;
    work.input_grad.memory_bytes = backward_memory_factor * 2.0 * hidden_elements * e + backward_loss * logit_elements;
    return work;
}

LayerWork embedding_work(const LayerWorkShape& shape) {
    const double tokens = shape.micro * shape.seq, h = shape.model.hidden, e = shape.element_bytes;
    LayerWork work;
    // Lookup (write the rows), position add for GPT (read 2, write 1), dropout (read, write, mask);
    // the backward scatters the gradient rows into the table (read, read-modify-write).
    const bool gpt = shape.model.kind == ModelKind::gpt;
    work.forward.memory_bytes = tokens * h * (e + (gpt ? 3.0 * e + 2.0 * e + 1.0 : 0.0));
    work.weight_grad.memory_bytes = 3.0 * tokens * h * e;
    return work;
}

}  // namespace parbench

// torchtitan's op-level selective checkpointing (--recompute selective-op, theory/activation_memory.hpp)
// counted by hand on a small Llama layer: the products it recomputes and their FLOPs, the
// element-wise bytes it moves again, the bytes it keeps and rebuilds, and where it is refused; and
// the element-wise bytes of torchtitan's eager Llama code (plan --eager).
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "plan/layout_plan.hpp"
#include "theory/layer_work.hpp"
#include "theory/layout.hpp"
#include "theory/llama_activation_memory.hpp"
#include "theory/model_flops.hpp"

namespace parbench {
namespace {

// h 8, 2 query heads of 4 sharing 1 key/value head (h_kv 4), SwiGLU width f 16, 2 layers.
ModelConfig hand_llama() {
    ModelConfig model;
    model.name = "hand-llama";
    model.kind = ModelKind::llama;
    model.layers = 2;
    model.hidden = 8;
    model.heads = 2;
    model.kv_heads = 1;
    model.ffn_hidden = 16;
    model.seq_len = 4;
    model.vocab = 32;
    return model;
}

// One sequence of 4 tokens, tp 1, bf16.
LayerWorkShape hand_shape() {
    LayerWorkShape shape;
    shape.model = hand_llama();
    shape.seq = 4;
    shape.keys = 4;
    shape.micro = 1;
    shape.element_bytes = 2;
    return shape;
}

ModelConfig model(const std::string& name) {
    return load_model_config(std::string(PARBENCH_TEST_MODELS) + "/" + name + ".json");
}

TEST(OpLevelRecompute, RecomputesEveryOtherProductAndTheElementwiseOps) {
    const LayerWork work = transformer_layer_work(hand_shape(), AttentionKind::flash, Recompute::selective_op);
    // Products in forward order wq, wk, wv, wo, w1, w3, w2: the 2nd, 4th and 6th again.
    ASSERT_EQ(work.recompute.gemms.size(), 3u);
    for (const Gemm& g : work.recompute.gemms) EXPECT_EQ(g.role, GemmRole::linear) << g.name;
    // 4 tokens: wk 2*4*8*4 = 256, wo 2*4*8*8 = 512, w3 2*4*8*16 = 1024; no attention product
    // (the kernel's output is kept).
    EXPECT_DOUBLE_EQ(work.recompute.flops(), 256.0 + 512.0 + 1024.0);
    // Element-wise, bf16: two RMSNorms 2*(2*32*2) = 256, RoPE on q and k 2*4*(8+4)*2 = 192, SwiGLU
    // 3*64*2 = 384, and one of the two residual adds 3*32*2 = 192 (the block's output add is not
    // rebuilt): 1024 of the forward's 1216.
    EXPECT_DOUBLE_EQ(work.forward.memory_bytes, 1216.0);
    EXPECT_DOUBLE_EQ(work.recompute.memory_bytes, 1024.0);
    // The rest of the layer's work is the no-recompute layer's.
    const LayerWork none = transformer_layer_work(hand_shape(), AttentionKind::flash, Recompute::none);
    EXPECT_DOUBLE_EQ(work.forward.flops(), none.forward.flops());
    EXPECT_DOUBLE_EQ(work.input_grad.flops() + work.weight_grad.flops(), none.input_grad.flops() + none.weight_grad.flops());
    EXPECT_DOUBLE_EQ(none.recompute.flops(), 0.0);
    // The step's recompute FLOPs (model_flops) are the layers' sum: 2 layers x 1792 per sequence.
    EXPECT_DOUBLE_EQ(recompute_flops_per_step(hand_llama(), 1, 4, Recompute::selective_op), 2.0 * 1792.0);
}

// Eager PyTorch runs torchtitan's RMSNorm, RoPE and SwiGLU op by op (theory/layer_work.cpp).
TEST(EagerElementwise, EachOpReadsAndWritesHbmWithTheNormsAndRopesUpcasts) {
    LayerWorkShape shape = hand_shape();
    shape.eager_elementwise = true;
    const LayerWork eager = transformer_layer_work(shape, AttentionKind::flash, Recompute::selective_op);
    // bf16, 4 tokens: RMSNorm 6 + 8 + 4 + 8 + 6 + 4 = 36 B per element, 2 x 36 x 32 = 2304; residual
    // adds as fused, 384; SwiGLU 5 x 2 per gate element, 10 x 64 = 640; RoPE 6 + 8 + 6 = 20 per
    // element of q and k, 20 x 4 x 12 = 960.
    EXPECT_DOUBLE_EQ(eager.forward.memory_bytes, 2304.0 + 384.0 + 640.0 + 960.0);
    EXPECT_DOUBLE_EQ(eager.input_grad.memory_bytes, 1.5 * eager.forward.memory_bytes);
    // Op-level recompute repeats them as eager too, less the block's output add.
    EXPECT_DOUBLE_EQ(eager.recompute.memory_bytes, eager.forward.memory_bytes - 192.0);
    // The products are the fused layer's.
    const LayerWork fused = transformer_layer_work(hand_shape(), AttentionKind::flash, Recompute::selective_op);
    EXPECT_DOUBLE_EQ(eager.forward.flops() + eager.recompute.flops(), fused.forward.flops() + fused.recompute.flops());
    // fp32 activations: no casts, so RMSNorm 8 + 4 + 8 + 8 = 28, RoPE 8, SwiGLU 20 per element.
    shape.element_bytes = 4;
    EXPECT_DOUBLE_EQ(transformer_layer_work(shape, AttentionKind::flash, Recompute::none).forward.memory_bytes,
                     2 * 28.0 * 32 + 2 * 3.0 * 32 * 4 + 20.0 * 64 + 8.0 * 48);
}

TEST(OpLevelRecompute, KeepsTheBlockInputAndTheSavedOutputsOnly) {
    // s 4, b 1, bf16: input 2sbh 64, q 64, v 2sb*h_kv 32, attention output 64, w1 2sbf 128, w2 64.
    const LayerActivationBytes kept =
        llama_paper_layer_activation_bytes(hand_llama(), 4, 1, 1, false, Recompute::selective_op);
    EXPECT_DOUBLE_EQ(kept.bytes, 64.0 + 64.0 + 32.0 + 64.0 + 128.0 + 64.0);
    EXPECT_NE(kept.formula.find("8sbh + 2sb·h_kv + 2sbf"), std::string::npos) << kept.formula;
    // Below selective's items (12sbh + 4sb*h_kv + 6sbf = 384 + 64 + 384 under flash's rule).
    EXPECT_DOUBLE_EQ(llama_paper_layer_activation_bytes(hand_llama(), 4, 1, 1, false, Recompute::selective).bytes,
                     832.0);
    // Rebuilt in one layer's backward: the two norms' outputs, q and k after RoPE, the MLP norm's
    // input 4 x 64 + 32, up's output and the product 2 x 128.
    EXPECT_DOUBLE_EQ(llama_op_recompute_rebuilt_bytes(hand_llama(), 4, 1).bytes, 4.0 * 64.0 + 32.0 + 2.0 * 128.0);
    EXPECT_THROW(llama_paper_layer_activation_bytes(hand_llama(), 4, 1, 2, true, Recompute::selective_op),
                 std::logic_error);
}

TEST(OpLevelRecompute, PlanMemoryHoldsEveryLayersKeptBytesAndOneLayersRebuilt) {
    PlanLayout p;
    p.states = StateConvention::megatron;
    Layout& l = p.engine;
    l.model = model("llama-tiny");  // h 64, h_kv 32, f 160, 2 layers
    l.seq_len = 32;
    l.attention = AttentionKind::flash;
    l.recompute = Recompute::selective_op;
    const PlanMemory m = plan_memory(p);
    // Kept 2*32*(4*64 + 32 + 160) = 28672 per layer; rebuilt 2*32*(4*64 + 32 + 2*160) = 38912.
    EXPECT_DOUBLE_EQ(m.activation_bytes_per_layer, 28672.0);
    EXPECT_DOUBLE_EQ(m.activations, 2.0 * 28672.0 + 38912.0);
    EXPECT_NE(m.activation_formula.find("+ 8sbh + 2sb·h_kv + 4sbf, one layer's recompute"), std::string::npos)
        << m.activation_formula;
}

TEST(OpLevelRecompute, NameRoundTripsAndTheEngineAndUnpricedLayoutsRefuseIt) {
    EXPECT_EQ(parse_recompute("selective-op"), Recompute::selective_op);
    EXPECT_EQ(recompute_name(Recompute::selective_op), "selective-op");
    LayoutFlags flags;
    flags.recompute = "selective-op";
    LayoutTarget framework;
    framework.engine = false;
    framework.auto_attention = AttentionKind::flash;
    framework.default_precision = Precision::bf16;
    const ModelConfig llama = model("llama-tiny");
    EXPECT_EQ(resolve_layout(flags, llama, 32, framework).recompute, Recompute::selective_op);
    auto refusal = [&](const LayoutFlags& f, const ModelConfig& config, const LayoutTarget& target) {
        try {
            resolve_layout(f, config, 32, target);
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    // train (and plan --states parbench): one line naming the flag and what train runs.
    const std::string engine = refusal(flags, llama, LayoutTarget{});
    EXPECT_NE(engine.find("--recompute selective-op"), std::string::npos) << engine;
    EXPECT_NE(engine.find("none, selective or full"), std::string::npos) << engine;
    EXPECT_NE(refusal(flags, model("gpt-tiny"), framework).find("not a dense Llama"), std::string::npos);
    LayoutFlags tp = flags;
    tp.tp = 2;
    tp.sp = true;
    EXPECT_NE(refusal(tp, llama, framework).find("--tp 1"), std::string::npos);
    LayoutFlags naive = flags;
    naive.attention = "naive";
    EXPECT_NE(refusal(naive, llama, framework).find("--attention naive"), std::string::npos);
}

}  // namespace
}  // namespace parbench

// The shape of a model as configs/models/*.json describe it. A config names its kind and the
// sizes of that kind, nothing else: an unknown or missing key is a UsageError naming the key
// and the file, so a typo never silently trains a different model.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "kernels/moe_router_math.hpp"
#include "theory/moe.hpp"
#include "theory/moe_memory.hpp"

namespace parbench {

enum class ModelKind { gpt, mlp, llama };

struct ModelConfig {
    std::string name;  // the file's stem, or the NAME given to --model
    std::string source;  // the file it was read from
    ModelKind kind = ModelKind::gpt;
    int layers = 0;
    int hidden = 0;
    int heads = 0;    // gpt and llama
    int seq_len = 1;  // gpt, llama: maximum (and trained) sequence length; mlp: 1 (one row per sample)
    int vocab = 0;    // gpt and llama
    // llama only: grouped-query attention's key/value heads (dividing heads), the SwiGLU
    // width, the rotary base (RoPE, arXiv 2104.09864) and RMSNorm's epsilon. A Llama's
    // output projection is its own matrix, never tied to the input embedding.
    int kv_heads = 0;
    int ffn_hidden = 0;
    // gpt and llama, optional: the sequences per step its authors trained with (the paper's,
    // cited in the file's description). plan --search prices it when --global-batch is not
    // given; train, whose runs are small, keeps its own default. 0: not published.
    int trained_global_batch = 0;
    double rope_theta = 10000.0;
    double norm_eps = 1e-5;
    // gpt and llama, optional ("moe": {...}): a mixture of experts in the layers from
    // first_dense on, every `every`-th of them (theory/moe.hpp; train/moe/ runs it). "router":
    // the score function, "softmax" (Mixtral) or "sigmoid" (DeepSeek-V3). "expert_activation":
    // the experts' MLP form (theory/moe_memory.hpp's ExpertActivation), by default the family's
    // own: GELU for GPT, SwiGLU for Llama.
    struct Moe {
        int experts = 0;
        int top_k = 0;
        int shared_experts = 0;
        int expert_hidden = 0;
        int every = 1;
        int first_dense = 0;
        MoeScore score = MoeScore::softmax;
        ExpertActivation activation = ExpertActivation::swiglu;
        // Matrices per expert: 3 (gate, up, down) for SwiGLU, 2 (up, down) for GELU.
        int matrices_per_expert() const { return activation == ExpertActivation::swiglu ? 3 : 2; }
        // Whether layer `layer` (0-based) is an MoE layer.
        bool is_moe_layer(int layer) const { return layer >= first_dense && (layer - first_dense) % every == 0; }
    };
    std::optional<Moe> moe = std::nullopt;
    // llama only, optional ("mla": {...}): DeepSeek's latent attention, for counting its
    // parameters only (nothing runs it).
    std::optional<LatentAttentionShape> mla = std::nullopt;
    int moe_layer_count() const;
    // Models whose tokens form sequences (gpt, llama), as opposed to one row per sample.
    bool has_sequence() const { return kind != ModelKind::mlp; }
};

// The ranges a model's sizes must lie in, whether a config file or plan's flags give them: far
// beyond any model trained, and small enough that every tensor's element count and the whole
// parameter count stay exact in 64 bits and that per-layer tables stay bounded.
namespace model_limits {
inline constexpr std::int64_t max_layers = 1 << 16;
inline constexpr std::int64_t max_hidden = 1 << 20;
inline constexpr std::int64_t max_seq_len = 1 << 24;
inline constexpr std::int64_t max_vocab = 1 << 24;
inline constexpr std::int64_t max_ffn_hidden = 1 << 22;
inline constexpr std::int64_t max_trained_global_batch = 1 << 30;  // plan's --global-batch limit
inline constexpr double max_parameters = 1e15;  // 500 x the largest model published
// Below these the float kernels give NaN at the first step (parse_model_config says how).
inline constexpr double min_rope_theta = 1.0;
inline constexpr double min_norm_eps = std::numeric_limits<float>::min();  // float's smallest normal number
}  // namespace model_limits

std::string model_kind_name(ModelKind kind);

// `source` names the document in messages.
ModelConfig parse_model_config(const nlohmann::json& document, const std::string& name, const std::string& source);

// NAME (a file NAME.json in the models folder) or a PATH (anything with a '/' or ending in
// .json). UsageError when it cannot be found, read or parsed.
ModelConfig load_model_config(const std::string& name_or_path);

// $PARBENCH_MODELS_DIR, else configs/models beside the build (<exe>/../configs/models), else
// in the source tree this file was compiled from.
std::string models_directory();

nlohmann::json to_json(const ModelConfig& config);

struct LlamaShape;
// The shape theory/llama_formulas.hpp's formulas take; config.kind must be llama.
LlamaShape llama_shape(const ModelConfig& config);
// The shape theory/moe.hpp's formulas take; config.moe must be set, config.kind llama.
MoeShape moe_shape(const ModelConfig& config);
// Total, active and routed-expert parameters of an MoE GPT or Llama (config.moe set): the
// Llama's by theory/moe.hpp's formulas, the GPT's by GPT-2's blocks with MoE MLPs.
MoeParameterCount moe_parameter_count(const ModelConfig& config);

}  // namespace parbench

#include "theory/model_config.hpp"

#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/exact_number.hpp"
#include "core/json_file.hpp"
#include "theory/llama_formulas.hpp"

namespace parbench {
namespace {

namespace fs = std::filesystem;

// Integer sizes within model_limits (core/checked.hpp names the file and key when not).
int positive_int(const JsonFields& document, const char* key, std::int64_t max) {
    return static_cast<int>(document.integer(key, 1, max));
}

double positive_number(const JsonFields& document, const char* key, double fallback) {
    return document.optional_number(key, 0.0, 1e30, true).value_or(fallback);
}

// Values the float kernels turn into NaN at the first step, refused with what they do there:
//   rope_theta  kernels/rope_math.hpp turns pair i by position x exp(-2i/hs x log(theta)) in
//               float; below 1 the frequencies rise with i instead of falling (RoPE, arXiv
//               2104.09864 sec. 3.2.2, takes 10000), and below about 1e-38 log(theta) is -inf in
//               float: 0 x inf and position x inf make every angle NaN (issue 32: 1e-300 passed,
//               and the first step's loss was NaN)
//   norm_eps    kernels/rmsnorm_math.hpp divides by sqrt(mean square + eps) in float: below float's
//               smallest normal number eps is 0 or subnormal, and a row of zeros is 0 / 0
void check_float_ranges(const JsonFields& fields, const ModelConfig& config) {
    if (config.rope_theta < model_limits::min_rope_theta)
        throw UsageError(fields.name("rope_theta") + " is " + exact_number_text(config.rope_theta) +
                         ": the rotary base must be at least 1 (RoPE's is 10000, Llama 3's 500000); below 1 its "
                         "frequencies theta^(-2i/hs) rise with the channel pair instead of falling, and below about "
                         "1e-38 the float kernels take its log as -inf and every angle is NaN");
    if (config.norm_eps < model_limits::min_norm_eps)
        throw UsageError(fields.name("norm_eps") + " is " + exact_number_text(config.norm_eps) +
                         ": RMSNorm's epsilon must be at least 1.2e-38, float's smallest normal number (the kernels "
                         "compute in float), or it is 0 there and a row of zeros gives 0/0 = NaN; 1e-5 and 1e-6 are "
                         "usual");
}

// A nested object's sizes, each known and in range: a typo in "moe" is refused like one at the top.
// `kind`: the family, whose own MLP form is the experts' default ("expert_activation").
ModelConfig::Moe parse_moe(const JsonFields& object, int layers, ModelKind kind) {
    object.refuse_unknown_keys(
        {"experts", "top_k", "shared_experts", "expert_hidden", "every", "first_dense", "router", "expert_activation"});
    ModelConfig::Moe moe;
    moe.experts = positive_int(object, "experts", model_limits::max_hidden);
    moe.top_k = positive_int(object, "top_k", model_limits::max_hidden);
    moe.expert_hidden = positive_int(object, "expert_hidden", model_limits::max_hidden);
    moe.shared_experts = static_cast<int>(object.optional_integer("shared_experts", 0, model_limits::max_hidden).value_or(0));
    moe.every = static_cast<int>(object.optional_integer("every", 1, model_limits::max_layers).value_or(1));
    moe.first_dense = static_cast<int>(object.optional_integer("first_dense", 0, model_limits::max_layers).value_or(0));
    const std::string router = object.optional_string("router").value_or("softmax");
    if (router != "softmax" && router != "sigmoid")
        throw UsageError(object.name("router") + " is \"" + router +
                         "\": use \"softmax\" (Mixtral) or \"sigmoid\" (DeepSeek-V3)");
    moe.score = router == "sigmoid" ? MoeScore::sigmoid : MoeScore::softmax;
    const std::string activation =
        object.optional_string("expert_activation").value_or(kind == ModelKind::gpt ? "gelu" : "swiglu");
    if (activation != "gelu" && activation != "swiglu")
        throw UsageError(object.name("expert_activation") + " is \"" + activation +
                         "\": use \"gelu\" (GPT's two-matrix MLP) or \"swiglu\" (Llama's three-matrix one)");
    moe.activation = activation == "gelu" ? ExpertActivation::gelu : ExpertActivation::swiglu;
    if (moe.top_k > moe.experts)
        throw UsageError(object.name("top_k") + " (" + std::to_string(moe.top_k) + ") is above \"experts\" (" +
                         std::to_string(moe.experts) + "); a token picks at most every expert");
    if (moe.first_dense >= layers)
        throw UsageError(object.name("first_dense") + " (" + std::to_string(moe.first_dense) +
                         ") leaves no MoE layer among " + std::to_string(layers) + "; lower it");
    return moe;
}

LatentAttentionShape parse_mla(const JsonFields& object) {
    object.refuse_unknown_keys({"q_lora_rank", "kv_lora_rank", "nope_head_dim", "rope_head_dim", "v_head_dim"});
    LatentAttentionShape mla;
    mla.q_lora_rank = positive_int(object, "q_lora_rank", model_limits::max_hidden);
    mla.kv_lora_rank = positive_int(object, "kv_lora_rank", model_limits::max_hidden);
    mla.nope_head_dim = positive_int(object, "nope_head_dim", model_limits::max_hidden);
    mla.rope_head_dim = positive_int(object, "rope_head_dim", model_limits::max_hidden);
    mla.v_head_dim = positive_int(object, "v_head_dim", model_limits::max_hidden);
    return mla;
}

bool looks_like_path(const std::string& text) {
    return text.find('/') != std::string::npos || (text.size() > 5 && text.ends_with(".json"));
}

std::string available_names(const std::string& directory) {
    std::set<std::string> names;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(directory, error))
        if (entry.path().extension() == ".json") names.insert(entry.path().stem().string());
    std::string text;
    for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
    return text.empty() ? "(none found)" : text;
}

}  // namespace

std::string model_kind_name(ModelKind kind) {
    switch (kind) {
        case ModelKind::gpt: return "gpt";
        case ModelKind::mlp: return "mlp";
        case ModelKind::llama: return "llama";
    }
    return "unknown";
}

ModelConfig parse_model_config(const nlohmann::json& document, const std::string& name, const std::string& source) {
    if (!document.is_object()) throw UsageError(source + ": a model config is a JSON object");
    if (!document.contains("kind") || !document.at("kind").is_string())
        throw UsageError(source + ": missing key \"kind\" (\"gpt\", \"llama\" or \"mlp\")");
    ModelConfig config;
    config.name = name;
    config.source = source;
    const std::string kind = document.at("kind").get<std::string>();
    std::set<std::string> allowed = {"kind", "description", "layers", "hidden"};
    if (kind == "gpt") {
        config.kind = ModelKind::gpt;
        allowed.insert({"heads", "seq_len", "vocab", "moe", "trained_global_batch"});
    } else if (kind == "llama") {
        config.kind = ModelKind::llama;
        allowed.insert({"heads", "kv_heads", "ffn_hidden", "seq_len", "vocab", "rope_theta", "norm_eps", "moe", "mla",
                        "trained_global_batch"});
    } else if (kind == "mlp") {
        config.kind = ModelKind::mlp;
    } else {
        throw UsageError(source + ": \"kind\" is \"" + kind + "\"; use \"gpt\", \"llama\" or \"mlp\"");
    }
    for (const auto& [key, value] : document.items()) {
        if (allowed.count(key) == 0)
            throw UsageError(source + ": unknown key \"" + key + "\" for a " + kind + " model (known: " +
                             [&] {
                                 std::string known;
                                 for (const std::string& k : allowed) known += (known.empty() ? "" : ", ") + k;
                                 return known;
                             }() +
                             ")");
    }
    const JsonFields fields(document, source);
    config.layers = positive_int(fields, "layers", model_limits::max_layers);
    config.hidden = positive_int(fields, "hidden", model_limits::max_hidden);
    if (config.has_sequence()) {
        config.heads = positive_int(fields, "heads", model_limits::max_hidden);
        config.seq_len = positive_int(fields, "seq_len", model_limits::max_seq_len);
        config.vocab = positive_int(fields, "vocab", model_limits::max_vocab);
        if (config.hidden % config.heads != 0)
            throw UsageError(source + ": \"hidden\" (" + std::to_string(config.hidden) + ") must divide by \"heads\" (" +
                             std::to_string(config.heads) + ")");
        if (const auto batch = fields.optional_integer("trained_global_batch", 1, model_limits::max_trained_global_batch))
            config.trained_global_batch = static_cast<int>(*batch);
    }
    if (config.kind == ModelKind::llama) {
        config.kv_heads = positive_int(fields, "kv_heads", model_limits::max_hidden);
        config.ffn_hidden = positive_int(fields, "ffn_hidden", model_limits::max_ffn_hidden);
        config.rope_theta = positive_number(fields, "rope_theta", config.rope_theta);
        config.norm_eps = positive_number(fields, "norm_eps", config.norm_eps);
        check_float_ranges(fields, config);
        if (config.heads % config.kv_heads != 0)
            throw UsageError(source + ": \"kv_heads\" (" + std::to_string(config.kv_heads) +
                             ") must divide \"heads\" (" + std::to_string(config.heads) +
                             "): each key/value head serves an equal group of query heads");
        if ((config.hidden / config.heads) % 2 != 0)
            throw UsageError(source + ": the head size hidden/heads (" + std::to_string(config.hidden / config.heads) +
                             ") must be even: rotary embedding turns pairs of channels");
        if (fields.has("mla")) config.mla = parse_mla(fields.object("mla"));
    }
    if (config.has_sequence() && fields.has("moe")) config.moe = parse_moe(fields.object("moe"), config.layers, config.kind);
    return config;
}

std::string models_directory() {
    if (const char* override_dir = std::getenv("PARBENCH_MODELS_DIR")) return override_dir;
    std::error_code error;
    const fs::path executable = fs::read_symlink("/proc/self/exe", error);
    if (!error) {
        const fs::path beside_build = executable.parent_path().parent_path() / "configs" / "models";
        if (fs::is_directory(beside_build, error)) return beside_build.string();
    }
    // The source tree the build came from (CMake defines it; __FILE__ is relative under
    // ccache's base_dir, which broke this lookup for test binaries in build/tests/*).
    return (fs::path(PARBENCH_SOURCE_ROOT) / "configs" / "models").string();
}

ModelConfig load_model_config(const std::string& name_or_path) {
    if (name_or_path.empty()) throw UsageError("--model: give a model NAME (e.g. gpt-tiny) or a PATH to a .json file");
    if (looks_like_path(name_or_path)) {
        if (!fs::is_regular_file(name_or_path))
            throw UsageError("--model " + name_or_path + ": no such file");
        return parse_model_config(read_json_file(name_or_path), fs::path(name_or_path).stem().string(), name_or_path);
    }
    const std::string directory = models_directory();
    const fs::path file = fs::path(directory) / (name_or_path + ".json");
    if (!fs::is_regular_file(file))
        throw UsageError("--model " + name_or_path + ": no model of that name in " + directory + "; known: " +
                         available_names(directory) + " (or give a path to a .json file)");
    return parse_model_config(read_json_file(file.string()), name_or_path, file.string());
}

nlohmann::json to_json(const ModelConfig& config) {
    nlohmann::json shape = {{"layers", config.layers}, {"hidden", config.hidden}};
    if (config.has_sequence()) {
        shape["heads"] = config.heads;
        shape["seq_len"] = config.seq_len;
        shape["vocab"] = config.vocab;
    }
    if (config.kind == ModelKind::llama) {
        shape["kv_heads"] = config.kv_heads;
        shape["ffn_hidden"] = config.ffn_hidden;
        shape["rope_theta"] = config.rope_theta;
        shape["norm_eps"] = config.norm_eps;
    }
    if (config.moe)
        shape["moe"] = {{"experts", config.moe->experts},         {"top_k", config.moe->top_k},
                        {"shared_experts", config.moe->shared_experts}, {"expert_hidden", config.moe->expert_hidden},
                        {"every", config.moe->every},             {"first_dense", config.moe->first_dense},
                        {"router", config.moe->score == MoeScore::sigmoid ? "sigmoid" : "softmax"},
                        {"expert_activation", config.moe->activation == ExpertActivation::gelu ? "gelu" : "swiglu"}};
    nlohmann::json out = {{"name", config.name}, {"kind", model_kind_name(config.kind)}, {"source", config.source},
                          {"shape", shape}};
    if (config.trained_global_batch > 0) out["trained_global_batch"] = config.trained_global_batch;
    return out;
}

LlamaShape llama_shape(const ModelConfig& config) {
    LlamaShape shape;
    shape.layers = config.layers;
    shape.hidden = config.hidden;
    shape.heads = config.heads;
    shape.kv_heads = config.kv_heads;
    shape.ffn_hidden = config.ffn_hidden;
    shape.vocab = config.vocab;
    return shape;
}

int ModelConfig::moe_layer_count() const {
    if (!moe) return 0;
    int count = 0;
    for (int layer = moe->first_dense; layer < layers; ++layer) count += (layer - moe->first_dense) % moe->every == 0;
    return count;
}

MoeShape moe_shape(const ModelConfig& config) {
    MoeShape shape;
    shape.dense = llama_shape(config);
    shape.moe_layers = config.moe_layer_count();
    shape.experts = config.moe->experts;
    shape.top_k = config.moe->top_k;
    shape.shared_experts = config.moe->shared_experts;
    shape.expert_hidden = config.moe->expert_hidden;
    if (config.mla) shape.attention_per_layer = latent_attention_parameters(config.hidden, config.heads, *config.mla);
    shape.expert_matrices = config.moe->matrices_per_expert();
    return shape;
}

MoeParameterCount moe_parameter_count(const ModelConfig& config) {
    if (config.kind == ModelKind::llama) return moe_parameter_count(moe_shape(config));
    // GPT-2's blocks (gpt_layout): embedding V·h + positions s·h + final LayerNorm 2h; per layer
    // two LayerNorms 4h and attention 4h² + 4h (QKV and projection with biases); a dense
    // layer's MLP 8h² + 5h (h -> 4h -> h with biases), an MoE layer's router h·E and experts of
    // m·h·f_e (no biases).
    const std::int64_t h = config.hidden, L = config.layers, moe_layers = config.moe_layer_count();
    const std::int64_t E = config.moe->experts, k = config.moe->top_k, S = config.moe->shared_experts;
    const std::int64_t expert = config.moe->matrices_per_expert() * h * config.moe->expert_hidden;
    const std::int64_t common = (static_cast<std::int64_t>(config.vocab) + config.seq_len + 2) * h +
                                L * (4 * h + 4 * h * h + 4 * h) + (L - moe_layers) * (8 * h * h + 5 * h) +
                                moe_layers * h * E;
    MoeParameterCount count;
    count.routed_experts = moe_layers * E * expert;
    count.total = common + moe_layers * (E + S) * expert;
    count.active = common + moe_layers * (k + S) * expert;
    return count;
}

}  // namespace parbench

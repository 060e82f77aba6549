#include "train/model_config.hpp"

#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/error.hpp"
#include "report/json_file.hpp"

namespace parbench {
namespace {

namespace fs = std::filesystem;

int positive_int(const nlohmann::json& document, const char* key, const std::string& source) {
    if (!document.contains(key)) throw UsageError(source + ": missing key \"" + key + "\" (a positive integer)");
    const nlohmann::json& value = document.at(key);
    if (!value.is_number_integer() || value.get<long long>() <= 0 || value.get<long long>() > (1LL << 30))
        throw UsageError(source + ": \"" + key + "\" must be a positive integer, got " + value.dump());
    return value.get<int>();
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

std::string model_kind_name(ModelKind kind) { return kind == ModelKind::gpt ? "gpt" : "mlp"; }

ModelConfig parse_model_config(const nlohmann::json& document, const std::string& name, const std::string& source) {
    if (!document.is_object()) throw UsageError(source + ": a model config is a JSON object");
    if (!document.contains("kind") || !document.at("kind").is_string())
        throw UsageError(source + ": missing key \"kind\" (\"gpt\" or \"mlp\")");
    ModelConfig config;
    config.name = name;
    config.source = source;
    const std::string kind = document.at("kind").get<std::string>();
    std::set<std::string> allowed = {"kind", "description", "layers", "hidden"};
    if (kind == "gpt") {
        config.kind = ModelKind::gpt;
        allowed.insert({"heads", "seq_len", "vocab"});
    } else if (kind == "mlp") {
        config.kind = ModelKind::mlp;
    } else {
        throw UsageError(source + ": \"kind\" is \"" + kind + "\"; use \"gpt\" or \"mlp\"");
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
    config.layers = positive_int(document, "layers", source);
    config.hidden = positive_int(document, "hidden", source);
    if (config.kind == ModelKind::gpt) {
        config.heads = positive_int(document, "heads", source);
        config.seq_len = positive_int(document, "seq_len", source);
        config.vocab = positive_int(document, "vocab", source);
        if (config.hidden % config.heads != 0)
            throw UsageError(source + ": \"hidden\" (" + std::to_string(config.hidden) + ") must divide by \"heads\" (" +
                             std::to_string(config.heads) + ")");
    }
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
    // src/train/model_config.cpp -> <source root>/configs/models
    return (fs::path(__FILE__).parent_path().parent_path().parent_path() / "configs" / "models").string();
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
    if (config.kind == ModelKind::gpt) {
        shape["heads"] = config.heads;
        shape["seq_len"] = config.seq_len;
        shape["vocab"] = config.vocab;
    }
    return {{"name", config.name}, {"kind", model_kind_name(config.kind)}, {"source", config.source}, {"shape", shape}};
}

}  // namespace parbench

// The shape of a model as configs/models/*.json describe it. A config names its kind and the
// sizes of that kind, nothing else: an unknown or missing key is a UsageError naming the key
// and the file, so a typo never silently trains a different model.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace parbench {

enum class ModelKind { gpt, mlp };

struct ModelConfig {
    std::string name;  // the file's stem, or the NAME given to --model
    std::string source;  // the file it was read from
    ModelKind kind = ModelKind::gpt;
    int layers = 0;
    int hidden = 0;
    int heads = 0;    // gpt only
    int seq_len = 1;  // gpt: maximum (and trained) sequence length; mlp: 1 (one row per sample)
    int vocab = 0;    // gpt only
};

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

}  // namespace parbench

#include "train/model.hpp"

#include "train/gpt.hpp"
#include "train/mlp.hpp"

namespace parbench {

std::unique_ptr<Model> make_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                  Ops& ops, MemoryLedger& ledger) {
    if (config.kind == ModelKind::gpt) return make_gpt_model(config, shape, seed, ops, ledger);
    return make_mlp_model(config, shape, seed, ops, ledger);
}

ParameterLayout model_parameter_layout(const ModelConfig& config, int seq_len) {
    if (config.kind == ModelKind::gpt) return gpt_parameter_layout(config, seq_len);
    return mlp_parameter_layout(config);
}

}  // namespace parbench

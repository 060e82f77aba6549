#include "train/model.hpp"

#include "train/gpt.hpp"
#include "train/mlp.hpp"

namespace parbench {

std::unique_ptr<Model> make_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                  Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp) {
    if (config.kind == ModelKind::gpt) return make_gpt_model(config, shape, seed, ops, ledger, tp);
    return make_mlp_model(config, shape, seed, ops, ledger, tp);
}

ParameterLayout model_parameter_layout(const ModelConfig& config, int seq_len, const TensorSplit& split) {
    if (config.kind == ModelKind::gpt) return gpt_parameter_layout(config, seq_len, split);
    return mlp_parameter_layout(config, split);
}

}  // namespace parbench

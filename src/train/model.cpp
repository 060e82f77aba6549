#include "train/model.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "train/models/gpt.hpp"
#include "train/models/llama.hpp"
#include "train/models/mlp.hpp"

namespace parbench {

std::unique_ptr<Model> make_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                  Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp,
                                  const PipelinePart& part, Precision precision, Recompute recompute,
                                  const ContextGroup& cp, const MoeContext& moe, AttentionKind attention) {
    if (config.moe && !config.has_sequence())
        throw std::logic_error("make_model: mixture-of-experts layers are built in GPT and Llama models only");
    if (cp.active() && !config.has_sequence())
        throw std::logic_error("make_model: the MLP has no sequence to split over a context-parallel group");
    if (config.kind == ModelKind::gpt)
        return make_gpt_model(config, shape, seed, ops, ledger, tp, part, precision, recompute, cp, moe, attention);
    if (config.kind == ModelKind::llama)
        return make_llama_model(config, shape, seed, ops, ledger, tp, part, precision, recompute, cp, moe, attention);
    if (recompute != Recompute::none) throw std::logic_error("make_model: the MLP has nothing to recompute");
    if (part.active()) throw std::logic_error("make_model: pipeline stages are cut from GPT and Llama models only");
    return make_mlp_model(config, shape, seed, ops, ledger, tp, precision);
}

namespace {
[[noreturn]] void no_pipeline(const char* what) {
    throw std::logic_error(std::string("Model::") + what + ": this model was built without pipeline chunks");
}
}  // namespace

void ParameterAccess::update_piece(int, std::size_t, std::size_t, const float*) {
    throw std::logic_error("ParameterAccess::update_piece: this scheme does not update in pieces");
}

std::size_t Model::boundary_numel() const { no_pipeline("boundary_numel"); }
float* Model::boundary_input(int, int) { no_pipeline("boundary_input"); }
const float* Model::boundary_output(int, int) { no_pipeline("boundary_output"); }
float* Model::boundary_gradient(int, int) { no_pipeline("boundary_gradient"); }
void Model::forward_chunk(int, int, ParameterAccess&) { no_pipeline("forward_chunk"); }
void Model::backward_chunk(int, int, float, BackwardPass, ParameterAccess&) { no_pipeline("backward_chunk"); }
int Model::shared_unit() const { return -1; }
bool Model::computes_loss() const { return true; }
ContextAttention* Model::context_attention() { return nullptr; }
std::size_t Model::context_workspace_bytes() const { return 0; }
double Model::auxiliary_loss(int) const { return 0.0; }
std::vector<MoeLayerStats> Model::finish_step() { return {}; }
std::vector<int> Model::moe_layers() const { return {}; }
Model::MoeMemory Model::moe_memory() const { return {}; }
void Model::set_moe_exchange_switch(std::function<void()>) {}

}  // namespace parbench
